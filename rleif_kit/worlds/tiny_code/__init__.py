"""The tiny code world: programmatic code tasks with hidden tests for the CPU demo of the WizardCoder arm."""
