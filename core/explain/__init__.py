"""Opening the model up: attention arithmetic (3.2.1), saliency, the inspection hooks."""
