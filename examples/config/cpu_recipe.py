# nanoGPT's README recipe for a machine without a GPU, written out: the main job's defaults
# (./run.sh alone trains exactly this). A starting point for your own config file.
n_layer = 4
n_head = 4
n_embd = 128
block_size = 64
batch_size = 12
dropout = 0.0
bias = False
max_iters = 2000
lr_decay_iters = 2000
learning_rate = 1e-3
min_lr = 1e-4
warmup_iters = 100
beta1 = 0.9
beta2 = 0.99
weight_decay = 0.1
grad_clip = 1.0
eval_interval = 250
eval_iters = 200
