import torch

# Tiny models run fastest on one thread; on a shared 2-core machine a second OpenMP thread
# waiting for a busy core can make small ops orders of magnitude slower.
torch.set_num_threads(1)
