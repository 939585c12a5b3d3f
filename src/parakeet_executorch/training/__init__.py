"""Training the small demo model: synthetic espeak-ng corpus, TDT loss for CPU, training and WER evaluation."""
