import torch

# Two cores, many small models: one intra-op thread per test process avoids oversubscription.
torch.set_num_threads(1)
