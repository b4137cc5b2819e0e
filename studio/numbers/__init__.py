"""The numbers behind the explaining and comparing tabs and their API endpoints, with no Gradio: the What if,
Attention arithmetic and Saliency tabs' (explanations) and the Compare tab's (comparison), the input checked as
the page checks it, refusals in words, and plain data for scripts."""
