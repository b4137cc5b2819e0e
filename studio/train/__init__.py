"""The Train tab: the job (one per process), its set-up and sources, saving and downloads, the tab, its form,
its live view and its plots."""
