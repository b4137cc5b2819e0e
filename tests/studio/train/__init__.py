"""The Train tab (studio/train/): its job, set-up, form, live view and saving, driven from Python."""
