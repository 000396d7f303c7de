# nanoGPT's shakespeare_char settings, in nanoGPT's config-file form (its train.py reads the
# same keys): a 6-layer, 384-wide character model. examples/train.py reads it too:
#   ./run.sh examples/config/train_shakespeare_char.py --max_iters=500
# On two CPU cores a step of this size takes about half a second: 5000 steps, ~45 minutes.
# dataset names data/shakespeare_char/input.txt when it exists; else the default corpus.

out_dir = 'out-shakespeare-char'
eval_interval = 250
eval_iters = 200
log_interval = 10  # ignored: every step is shown
always_save_checkpoint = False  # ignored: every evaluation writes a checkpoint

wandb_log = False  # ignored
wandb_project = 'shakespeare-char'
wandb_run_name = 'mini-gpt'

dataset = 'shakespeare_char'
gradient_accumulation_steps = 1
batch_size = 64
block_size = 256  # context of up to 256 previous characters

n_layer = 6
n_head = 6
n_embd = 384
dropout = 0.2

learning_rate = 1e-3  # with baby networks can afford to go a bit higher
max_iters = 5000
lr_decay_iters = 5000  # make equal to max_iters usually
min_lr = 1e-4  # learning_rate / 10 usually
beta2 = 0.99  # make a bit bigger because number of tokens per iter is small

warmup_iters = 100  # not super necessary potentially
