"""Links and lessons (studio/links/)."""
