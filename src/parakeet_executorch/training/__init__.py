"""Training the small demo model: text, synthesizers, augmentation, corpora, CPU TDT loss, train and WER eval."""
