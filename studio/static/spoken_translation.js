// The translation as a screen reader hears it, in the page (a server call per translation, one of ten a press set
// off, cost the studio's queue more than the line is worth): "Translation: ...", escaped for gr.Markdown as
// studio.text.md escapes, HTML entities first, then Markdown punctuation.
(text) => text
  ? 'Translation: ' + text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
      .replace(/([\\`*_{}\[\]()#+\-.!|~>$])/g, '\\$1')
  : ''
