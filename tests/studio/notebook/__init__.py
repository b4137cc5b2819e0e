"""The studio in a notebook (studio/notebook/): its views a line each, a run trained and watched, the whole studio."""
