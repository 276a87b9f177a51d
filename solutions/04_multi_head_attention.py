# %% [markdown]
# # 04 · Multi-head attention
#
# **The idea.** One attention head answers one question per position: it computes *one*
# distribution over the keys and returns *one* weighted average. Multi-head attention asks
# $h$ questions at once: $h$ small heads, each with its own projections, side by side, and
# one matrix $W_O$ that mixes their answers.
#
# In this lesson you will
# 1. see why one head is not enough, and what the heads compute;
# 2. learn the trick that runs all heads as *one* batched attention: **split** the feature
#    axis into heads, attend, **merge** them back; and write `split_heads` and `merge_heads`;
# 3. count parameters and multiply-adds: $h$ heads of width $d_k = d_{model}/h$ cost
#    exactly what one full-width head costs;
# 4. write the `MultiHeadAttention` module, and prove it equals `torch.nn.MultiheadAttention`
#    given the same weights;
# 5. train a tiny model and watch two heads learn two different relations.

# %%
import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

from course import check
from course.plotting import attention_heatmap
from course.utils import gap, seed_everything

seed_everything(0)
torch.set_printoptions(precision=3, sci_mode=False)

# %% [markdown]
# ## 1. Why one head is not enough
#
# Lesson 03 ended with one attention head: learned projections $W_Q, W_K, W_V$, then
#
# $$
# \operatorname{Attention}(Q, K, V) = \operatorname{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}}\right) V .
# $$
#
# Each query gets a single probability distribution over the keys. Suppose a word needs
# two things at once: *which word came just before me* (syntax) and *which noun am I
# about* (meaning). One head must split its weight between the two positions, and what it
# returns is a blend, $0.5\, v_a + 0.5\, v_b$, in which the two answers are mixed
# together: the same blend for $(a, b)$ as for $(b, a)$.
#
# Multi-head attention gives each question its own head:
#
# $$
# \text{head}_i = \operatorname{Attention}\!\left(Q W_Q^{i},\; K W_K^{i},\; V W_V^{i}\right),
# \qquad
# \operatorname{MultiHead}(Q, K, V) = \operatorname{Concat}(\text{head}_1, \dots, \text{head}_h)\, W_O .
# $$
#
# Each $W_Q^i, W_K^i, W_V^i$ maps $d_{model}$ features to $d_k = d_{model} / h$, so the $h$
# answers concatenated are $d_{model}$ wide again; $W_O$ ($d_{model} \times d_{model}$) mixes
# them. The paper ("Attention Is All You Need") uses $d_{model} = 512$, $h = 8$, $d_k = 64$.

# %% [markdown]
# ## 2. All heads in one matmul: split and merge
#
# Stack the $h$ matrices $W_Q^1, \dots, W_Q^h$ side by side and you get one
# $d_{model} \times d_{model}$ matrix: one `nn.Linear(d_model, d_model)` computes the queries
# of every head at once. Head $j$'s query is then just the slice of features
# $j\,d_k : (j+1)\,d_k$ of the result.
#
# To let the attention of lesson 03 run on all heads as one batch, we reshape
# $(B, T, d_{model})$ into $(B, h, T, d_k)$: the head axis joins the batch axes in front,
# and each head sees its own $(T, d_k)$ matrix. Let's see which numbers go where on a
# tiny example: one sequence of $T = 2$ positions, $d_{model} = 6$, numbered $0 \dots 11$.

# %%
x = torch.arange(12).view(1, 2, 6)   # (B=1, T=2, d_model=6)
x

# %% [markdown]
# **Step 1: cut the features.** With $h = 3$ heads, `view(B, T, h, d_k)` splits the last
# axis into 3 slices of $d_k = 2$. Nothing moves in memory: position 0 still holds
# $0 \dots 5$, now as three rows: $[0, 1]$ for head 0, $[2, 3]$ for head 1, $[4, 5]$ for head 2.

# %%
cut = x.view(1, 2, 3, 2)             # (B, T, h, d_k)
cut

# %% [markdown]
# **Step 2: heads in front of time.** `transpose(1, 2)` swaps the $T$ and $h$ axes. Now
# `heads[0, j]` is head $j$'s own $(T, d_k)$ matrix: its slice of *every* position.

# %%
heads = cut.transpose(1, 2)          # (B, T, h, d_k) -> (B, h, T, d_k)
for j in range(3):
    print(f"head {j}: {heads[0, j].tolist()}")

# %% [markdown]
# **The tempting shortcut is wrong.** `x.view(B, h, T, d_k)` has the right shape, but a
# view keeps the memory order: it hands out the numbers $T \cdot d_k = 4$ at a time. Head 0
# gets $[0, 1, 2, 3]$, position 0's slices for heads 0 *and* 1; head 1 gets $[4, 5, 6, 7]$,
# half from position 0 and half from position 1. The "positions" a head attends between are
# no longer positions at all.

# %%
shortcut = x.view(1, 3, 2, 2)        # (B, h, T, d_k) by reshaping alone: scrambled
for j in range(3):
    print(f"head {j} after the shortcut: {shortcut[0, j].tolist()}")

# %% [markdown]
# The same pictures, each number coloured by the head its feature belongs to (blue: head 0's
# slice, orange: head 1's, green: head 2's); read the numbers to see the positions
# ($0 \dots 5$: position 0, $6 \dots 11$: position 1). The right split gives each head one
# colour and both positions; the shortcut mixes colours and positions.

# %%
def draw_grid(ax, values, title, d_k=2):
    """Numbers in a grid, each cell coloured by the head its feature belongs to."""
    head_of = (values % 6) // d_k                         # feature index -> its head
    ax.imshow(head_of, cmap="tab10", vmin=0, vmax=9, alpha=0.6)
    for row in range(values.shape[0]):
        for col in range(values.shape[1]):
            ax.text(col, row, int(values[row, col]), ha="center", va="center")
    ax.set_xticks(range(values.shape[1]))
    ax.set_yticks(range(values.shape[0]))
    ax.set_title(title, fontsize=10)


fig, axes = plt.subplots(1, 7, figsize=(13, 2.2),
                         gridspec_kw={"width_ratios": [6, 2, 2, 2, 2, 2, 2]})
draw_grid(axes[0], x[0], "x: (T=2, d_model=6)")
for j in range(3):
    draw_grid(axes[1 + j], heads[0, j], f"split: head {j}")
    draw_grid(axes[4 + j], shortcut[0, j], f"shortcut: head {j}")
for ax in axes:
    ax.set_xlabel("feature")
axes[0].set_ylabel("position")
axes[1].set_ylabel("position")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 3. Exercise: `split_heads` and `merge_heads`
#
# Write `split_heads(x, n_heads)`: `x` is $(B, T, d_{model})$; return $(B, h, T, d_k)$ with
# $d_k = d_{model} / h$, head $j$ holding features $j\,d_k : (j+1)\,d_k$ of every position.
# Read the sizes from `x.shape` and the `n_heads` argument.

# %%
def split_heads(x, n_heads):
    ### BEGIN SOLUTION
    B, T, d_model = x.shape
    d_k = d_model // n_heads
    x = x.view(B, T, n_heads, d_k)   # (B, T, d_model) -> (B, T, h, d_k): cut the features
    return x.transpose(1, 2)         # (B, T, h, d_k) -> (B, h, T, d_k): heads in front
    ### END SOLUTION


# %%
check.split_heads(split_heads)

# %% [markdown]
# After the attention, each head has its answer of width $d_k$ at every position:
# $(B, h, T, d_k)$. `merge_heads(x)` puts them side by side again, head 0 first:
# $(B, T, h \cdot d_k)$. It is the exact inverse of `split_heads`.
#
# Hint: after a `transpose` the tensor is no longer contiguous in memory and `.view` refuses
# to reshape it; `.reshape` copies when it has to (or call `.contiguous()` first).

# %%
def merge_heads(x):
    ### BEGIN SOLUTION
    B, h, T, d_k = x.shape
    x = x.transpose(1, 2)            # (B, h, T, d_k) -> (B, T, h, d_k)
    return x.reshape(B, T, h * d_k)  # (B, T, h, d_k) -> (B, T, d_model)
    ### END SOLUTION


# %%
check.merge_heads(merge_heads)

# %% [markdown]
# The round trip, with the course's reference versions (so this runs even before your
# exercise is done): split, then merge, gives back exactly the input.

# %%
from course import multihead as reference

x = torch.arange(12).view(1, 2, 6)                     # (B=1, T=2, d_model=6)
for n_heads in (1, 2, 3, 6):
    heads = reference.split_heads(x, n_heads)          # (1, h, 2, 6 // h)
    back = reference.merge_heads(heads)                # (1, 2, 6)
    print(f"h={n_heads}: heads {tuple(heads.shape)}, merged back equal to x: {torch.equal(back, x)}")

# %% [markdown]
# ## 4. More heads cost nothing extra
#
# Splitting changes *which* numbers are multiplied together, not *how many*. Count them,
# for self-attention over $T$ positions:
#
# | part | parameters | multiply-adds |
# |---|---|---|
# | $W_Q, W_K, W_V, W_O$ | $4\,d_{model}^2$ (+ $4\,d_{model}$ biases) | $4\,T\,d_{model}^2$ |
# | scores $QK^\top$, per head $T \times T \times d_k$ | none | $h \cdot T^2 d_k = T^2 d_{model}$ |
# | weights $\times V$, per head the same | none | $T^2 d_{model}$ |
#
# No entry depends on $h$. Let's check it on the paper's $d_{model} = 512$: count the
# parameters of real modules, and let PyTorch's `FlopCounterMode` count the multiply-adds
# of one forward pass (it counts 2 FLOPs per multiply-add; the softmax is not counted).

# %%
from torch.utils.flop_counter import FlopCounterMode

d_model, T = 512, 128
x = torch.randn(1, T, d_model)                                  # (B=1, T, d_model)
print(f"{'heads':>5} {'d_k':>4} {'parameters':>11} {'projections':>12} {'attention':>10}   (multiply-adds)")
for n_heads in (1, 2, 4, 8, 16):
    mha = reference.MultiHeadAttention(d_model, n_heads)
    parameters = sum(p.numel() for p in mha.parameters())
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        mha(x, x, x)
    counts = {str(op): flops // 2 for op, flops in counter.get_flop_counts()["Global"].items()}
    # aten.addmm: the four nn.Linear layers; aten.bmm: scores and weighted sum, all heads
    print(f"{n_heads:>5} {d_model // n_heads:>4} {parameters:>11,} {counts['aten.addmm']:>12,} "
          f"{counts['aten.bmm']:>10,}")
print(f"{'formula':>10} {4 * d_model**2 + 4 * d_model:>11,} {4 * T * d_model**2:>12,} "
      f"{2 * T**2 * d_model:>10,}")

# %% [markdown]
# Identical on every row. What the heads change is the *shape* of the computation: $h$
# independent $T \times T$ weight maps instead of one, each computed from a $d_k$-dimensional
# comparison. Each head is cheaper and narrower; together they can look at $h$ places.
#
# Note the two columns: at this length the projections cost 8 times more than the
# attention itself. The attention term grows as $T^2$, the projections as $T$: at long
# lengths the balance flips. That quadratic wall is lesson 10's topic.

# %% [markdown]
# ## 5. Exercise: the `MultiHeadAttention` module
#
# Write the module. The contract (the rest of the course builds on it):
#
# - `__init__(d_model, n_heads, dropout=0.0, bias=True)`: four projections
#   `self.w_q`, `self.w_k`, `self.w_v`, `self.w_o`, each `nn.Linear(d_model, d_model, bias=bias)`
#   (names matter: the checker copies its weights into them);
# - `forward(query, key, value, mask=None)`: `query` $(B, T_q, d_{model})$, `key` and `value`
#   $(B, T_k, d_{model})$, so the same module serves self-attention (all three the same) and
#   cross-attention (lesson 08). It returns **only** the output $(B, T_q, d_{model})$;
# - keep the attention weights $(B, h, T_q, T_k)$ of the latest call in `self.attn`
#   (`.detach()` them): we will plot them;
# - `mask` is boolean, **True = may attend**, already broadcastable to $(B, h, T_q, T_k)$:
#   pass it on unchanged;
# - dropout on the attention weights only while training:
#   `dropout_p = self.dropout if self.training else 0.0`.
#
# The steps: project with `w_q`, `w_k`, `w_v`; split each into heads; run
# `scaled_dot_product_attention` (lesson 03, imported below) on all heads at once; merge;
# mix with `w_o`. Use your `split_heads` and `merge_heads` from above.

# %%
from course.attention import scaled_dot_product_attention  # noqa: F401 (for your answer)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        ### BEGIN SOLUTION
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.n_heads, self.dropout = n_heads, dropout
        self.w_q = nn.Linear(d_model, d_model, bias=bias)   # all heads' W_Q^i side by side
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)   # mixes the concatenated heads
        self.attn = None
        ### END SOLUTION

    def forward(self, query, key, value, mask=None):
        ### BEGIN SOLUTION
        q = split_heads(self.w_q(query), self.n_heads)      # (B, h, T_q, d_k)
        k = split_heads(self.w_k(key), self.n_heads)        # (B, h, T_k, d_k)
        v = split_heads(self.w_v(value), self.n_heads)      # (B, h, T_k, d_k)
        dropout_p = self.dropout if self.training else 0.0
        heads, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p)
        # heads: (B, h, T_q, d_k), weights: (B, h, T_q, T_k)
        self.attn = weights.detach()
        return self.w_o(merge_heads(heads))                 # (B, T_q, d_model)
        ### END SOLUTION


# %% [markdown]
# The checker builds your module, copies known weights into `w_q`, `w_k`, `w_v`, `w_o`, and
# compares it with the reference on self-attention, on cross-attention ($T_q \ne T_k$,
# key $\ne$ value), and with padding and causal masks.

# %%
mha_ok = check.MultiHeadAttention(MultiHeadAttention)

# %% [markdown]
# ## 6. The same as `torch.nn.MultiheadAttention`
#
# PyTorch ships this layer. Give it and our module the same weights and they must compute
# the same thing. Two details to translate:
#
# - torch packs $W_Q, W_K, W_V$ into one `in_proj_weight` of shape $(3\,d_{model}, d_{model})$,
#   stacked in that order, and calls $W_O$ `out_proj`; `course.multihead.load_from_torch`
#   copies them into `w_q`, `w_k`, `w_v`, `w_o`;
# - torch's boolean `attn_mask` means the opposite of ours: **True = not allowed**. We pass it
#   `~mask`.
#
# We use your class if it passed the checker, else the reference.

# %%
from course.multihead import load_from_torch

seed_everything(0)
d_model, n_heads, B, T = 12, 3, 2, 5
theirs = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
with torch.no_grad():
    for p in theirs.parameters():        # torch starts its biases at 0: make every number count
        p.normal_(std=0.3)
Ours = MultiHeadAttention if mha_ok else reference.MultiHeadAttention
ours = load_from_torch(Ours(d_model, n_heads), theirs)
print("using", "your MultiHeadAttention" if mha_ok else "the reference course.multihead.MultiHeadAttention")
print("parameters: ours", sum(p.numel() for p in ours.parameters()),
      " torch's", sum(p.numel() for p in theirs.parameters()))

# %%
x = torch.randn(B, T, d_model)                               # (B, T, d_model)
causal = torch.ones(T, T, dtype=torch.bool).tril()           # (T, T), True = may attend
for name, mask in [("no mask", None), ("causal mask", causal)]:
    torch_mask = None if mask is None else ~mask             # torch: True = NOT allowed
    with torch.no_grad():
        want, want_weights = theirs(x, x, x, attn_mask=torch_mask,
                                    average_attn_weights=False)  # (B, T, d), (B, h, T, T)
        got = ours(x, x, x, mask=mask)                       # (B, T, d_model)
    print(f"{name:>11}: outputs equal {torch.allclose(got, want, atol=1e-6)} "
          f"(max |difference| {gap(got, want)}), per-head weights equal "
          f"{torch.allclose(ours.attn, want_weights, atol=1e-6)}")

# %% [markdown]
# Equal, to float32 rounding. Everything inside `torch.nn.MultiheadAttention` is what you
# just wrote: four projections, a split into heads, scaled dot-product attention, a merge.

# %% [markdown]
# ## 7. Watching heads specialise
#
# A task that needs two relations at once. Sequences of 8 random letters; at every
# position $t \ge 1$ the model must output two things: **the previous letter** $x_{t-1}$
# and **the first letter** $x_0$.
#
# The model is as small as it gets: a letter embedding plus a learned vector per position
# (attention alone cannot tell positions apart, lesson 05 shows why), one multi-head
# self-attention layer with a causal mask (position $t$ sees positions $0 \dots t$ only),
# and a linear read-out of both answers. Nothing else: whatever the model knows about other
# positions must come through the attention.
#
# We train it twice, with $h = 1$ and with $h = 2$ heads: the same $d_{model} = 8$, hence the
# same number of parameters.

# %%
letters = list("abcdefgh")
V, T_seq, d_small = len(letters), 8, 8


def letter_batch(n, generator):
    """Random sequences and both targets: the previous letter and the first letter."""
    tokens = torch.randint(0, V, (n, T_seq), generator=generator)   # (n, T)
    previous = tokens.roll(1, dims=1)                                # (n, T): x_{t-1}
    first = tokens[:, :1].expand(n, T_seq)                           # (n, T): x_0
    return tokens, previous, first


class TwoAnswers(nn.Module):
    def __init__(self, n_heads):
        super().__init__()
        self.embed = nn.Embedding(V, d_small)
        self.position = nn.Parameter(torch.randn(T_seq, d_small))   # one vector per position
        self.attention = reference.MultiHeadAttention(d_small, n_heads)
        self.read_out = nn.Linear(d_small, 2 * V)                    # logits for both answers
        self.causal = torch.ones(T_seq, T_seq, dtype=torch.bool).tril()

    def forward(self, tokens):                                       # (B, T)
        x = self.embed(tokens) + self.position                       # (B, T, d_small)
        x = self.attention(x, x, x, mask=self.causal)                # (B, T, d_small)
        return self.read_out(x).unflatten(-1, (2, V))                # (B, T, 2, V)


def train(n_heads, steps=300):
    seed_everything(0)
    generator = torch.Generator().manual_seed(0)
    model = TwoAnswers(n_heads)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(steps):
        tokens, previous, first = letter_batch(64, generator)
        logits = model(tokens)[:, 1:]                                # position 0 has no x_{-1}
        targets = torch.stack([previous, first], dim=-1)[:, 1:]      # (B, T-1, 2)
        loss = F.cross_entropy(logits.flatten(0, 2), targets.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model


def accuracy(model):
    tokens, previous, first = letter_batch(2000, torch.Generator().manual_seed(1))
    with torch.no_grad():
        guess = model(tokens)[:, 1:].argmax(-1)                      # (n, T-1, 2)
    both_right = (guess[..., 0] == previous[:, 1:]) & (guess[..., 1] == first[:, 1:])
    return both_right.float().mean().item()


models = {n_heads: train(n_heads) for n_heads in (1, 2)}
for n_heads, model in models.items():
    parameters = sum(p.numel() for p in model.parameters())
    print(f"h={n_heads}: {parameters} parameters, both answers right at "
          f"{accuracy(model):.0%} of positions")

# %% [markdown]
# Same size, same training, and only the two-head model solves it. Look at where each head
# attends on one sequence (rows: the position asking; columns: the positions it looks at).

# %%
tokens = torch.tensor([[letters.index(c) for c in "gcahbfed"]])      # (1, T)
labels = [f"{t}:{letters[i]}" for t, i in enumerate(tokens[0].tolist())]
fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
for model in models.values():
    with torch.no_grad():
        model(tokens)
single, pair = models[1].attention.attn[0], models[2].attention.attn[0]   # (h, T, T)
attention_heatmap(single[0], labels, labels, ax=axes[0], title="h = 1: the only head")
for j in range(2):
    attention_heatmap(pair[j], labels, labels, ax=axes[1 + j], title=f"h = 2: head {j}")
plt.tight_layout()
plt.show()

# %% [markdown]
# With two heads, one head puts its weight on the first letter (column 0), the other on the
# previous letter (the diagonal just below the main one): each learned one relation.
# The single head has to serve both and splits its weight between them, so what it
# returns is a blend the read-out cannot fully untangle. Measured over the whole sequence:

# %%
def where_weight_goes(weights):
    """Mean weight on the first position and on the previous one, for queries t = 2 .. T-1."""
    t = torch.arange(2, T_seq)
    return weights[t, 0].mean().item(), weights[t, t - 1].mean().item()


for name, weights in [("h=1, head 0", single[0]), ("h=2, head 0", pair[0]),
                      ("h=2, head 1", pair[1])]:
    on_first, on_previous = where_weight_goes(weights)
    print(f"{name}: {on_first:.0%} of its weight on the first letter, "
          f"{on_previous:.0%} on the previous one")

# %% [markdown]
# In trained Transformers the same thing happens at scale: some heads track the previous
# token, some attend to delimiters, some follow syntactic links, some resolve which noun a
# pronoun refers to. Not every head is that readable, but having many lets the model ask
# many questions at once.
#
# ## What's next
#
# Our model needed a learned vector per position, because attention itself is
# **order-blind**: shuffle the keys and values together and each query gets exactly the same
# answer. Lesson 05 proves it numerically and adds the Transformer's cure, the sinusoidal
# positional encoding.
