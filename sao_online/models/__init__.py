"""Policy and critic models, tokenizers, the embedded tiny default."""
