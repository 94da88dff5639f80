# Tokenizer, chat template and SFT samples (issue #4).
