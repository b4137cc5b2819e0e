"""Section 5: the schedule, the loss, the trainer, recipes, run preparation, evaluation."""
