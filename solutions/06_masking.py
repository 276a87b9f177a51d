# %% [markdown]
# # 06 · Masks: padding and looking ahead
#
# **The idea.** Attention lets every query look at every key. Two kinds of key must stay
# out of sight: the **future**, in a decoder that learns to predict the next word, and the
# **padding** that fills up the short sentences of a batch. A boolean mask hides them, and
# lesson 03 already taught attention to read one (True = may attend). Here we build the two
# masks, check that they hide exactly what they should, and combine them.
#
# In this lesson you will
# 1. see why a decoder must not look ahead: trained without a mask, a model learns to copy
#    the answer from the next position, and is useless once it has to generate;
# 2. write `causal_mask(T)`, check with autograd that nothing leaks from the future (the
#    output at position $t$ has a zero gradient with respect to every later input), and see
#    why that holds at every input;
# 3. batch sentences of different lengths, watch the padding change the outputs of the real
#    words, write `padding_mask(tokens, pad_id)`, and see the outputs become equal to the
#    sentence's own again;
# 4. combine both masks by broadcasting into the decoder's $(B, h, T_q, T_k)$ mask, and meet
#    lesson 03's query that may attend to nothing in a real batch;
# 5. translate between our convention (True = may attend) and `nn.MultiheadAttention`'s
#    (True = masked out): you will meet both.

# %%
import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from matplotlib.colors import ListedColormap, LogNorm
from torch import nn
from torch.nn.utils.rnn import pad_sequence

from course import check
from course import data as course_data
from course.attention import scaled_dot_product_attention
from course.multihead import MultiHeadAttention
from course.plotting import attention_heatmap
from course.utils import gap, seed_everything

seed_everything(0)
torch.set_printoptions(precision=3, sci_mode=False)

# %% [markdown]
# Every mask in this lesson is drawn the same way: blue where a query may attend, grey where
# it may not.

# %%
may_attend_colours = ListedColormap(["#d0d0d0", "#1f77b4"])   # False: grey, True: blue


def draw_mask(ax, mask, title, keys=None, queries=None, xlabel="key (attended to)",
              ylabel="query (attending)", colorbar=True):
    """A boolean (rows, columns) mask as a picture, with a colorbar labelled "may attend"
    (colorbar=False leaves it out, for a figure of many masks that draws one)."""
    image = ax.imshow(mask.int(), cmap=may_attend_colours, vmin=-0.5, vmax=1.5)
    ax.set_xticks(range(mask.shape[1]), keys if keys is not None else range(mask.shape[1]),
                  rotation=45, ha="right")
    ax.set_yticks(range(mask.shape[0]), queries if queries is not None else range(mask.shape[0]))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    if colorbar:
        bar = ax.figure.colorbar(image, ax=ax, ticks=[0, 1], fraction=0.046, pad=0.04)
        bar.ax.set_yticklabels(["False", "True"])
        bar.set_label("may attend")


# %% [markdown]
# ## 1. A decoder must not look ahead
#
# A decoder writes a sentence one token at a time: it predicts $x_{t+1}$ from
# $x_0, \dots, x_t$, appends it, and goes on. Training it that way would take $T$ passes per
# sentence. Instead it is trained with *teacher forcing* (lesson 01, section 6): its input is
# the true sentence, $x_0 \dots x_{T-2}$, not its own predictions, and the target at every
# position $t$ is the next token $x_{t+1}$. Since every input is known in advance, all
# $T - 1$ predictions can come out of one pass over the whole sentence.
#
# Teacher forcing supplies the inputs; what makes the one pass honest is the mask. In one pass
# over the whole sentence, self-attention at position $t$ can see position $t+1$: the very
# token it must predict. Let's see what a model makes of that. The
# data is random: every token is drawn uniformly from $V = 8$, so the next token cannot be
# predicted, and an honest model is right $1/8 = 12.5\%$ of the time. The model is close to
# lesson 04's: an embedding plus a learned vector per position, one multi-head
# self-attention layer ($d_{model} = 16$, 2 heads) whose output is added back to its input
# (a residual connection, which lesson 07 explains), and a linear read-out of the next
# token. We train it twice: once with lesson 03's causal mask (position $t$ sees
# $0 \dots t$), once with no mask. (The course runs on one CPU thread; see lesson 04,
# section 7.)

# %%
V, T_seq, d_model, n_heads = 8, 8, 16, 2


class NextToken(nn.Module):
    def __init__(self, causal):
        super().__init__()
        self.embed = nn.Embedding(V, d_model)
        self.position = nn.Parameter(torch.randn(T_seq, d_model))   # one vector per position
        self.attention = MultiHeadAttention(d_model, n_heads)
        self.read_out = nn.Linear(d_model, V)                        # logits of the next token
        self.causal = causal

    def forward(self, tokens):                                       # (B, T)
        T = tokens.shape[1]
        x = self.embed(tokens) + self.position[:T]                   # (B, T, d_model)
        mask = torch.ones(T, T, dtype=torch.bool).tril() if self.causal else None   # (T, T)
        x = x + self.attention(x, x, x, mask=mask)                   # (B, T, d_model)
        return self.read_out(x)                                      # (B, T, V)


def train(causal, steps=200, seed=0):
    seed_everything(seed)
    generator = torch.Generator().manual_seed(seed)
    model = NextToken(causal)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(steps):
        tokens = torch.randint(0, V, (64, T_seq), generator=generator)        # (64, T)
        logits = model(tokens[:, :-1])                                        # (64, T-1, V)
        loss = F.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())  # next tokens
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model


models = {"causal mask": train(causal=True), "no mask": train(causal=False)}

# %% [markdown]
# Two ways to measure each model on 1,000 new sequences: **teacher-forced**, the whole
# sequence in one pass as in training; and **one token at a time**, as when it generates:
# to predict $x_{t+1}$ the model gets $x_0 \dots x_t$ and nothing else, because the rest
# has not been written yet.

# %% tags=["nbval-ignore-output"]
test = torch.randint(0, V, (1000, T_seq), generator=torch.Generator().manual_seed(1))  # (n, T)


def accuracy_teacher_forced(model):
    with torch.no_grad():
        guess = model(test[:, :-1]).argmax(dim=-1)                   # (n, T-1)
    return (guess == test[:, 1:]).float().mean().item()


def accuracy_one_at_a_time(model):
    right = []
    with torch.no_grad():
        for t in range(T_seq - 1):
            guess = model(test[:, : t + 1])[:, -1].argmax(dim=-1)    # (n,): from x_0 .. x_t only
            right.append(guess == test[:, t + 1])
    return torch.stack(right).float().mean().item()


accuracy = {name: (accuracy_teacher_forced(model), accuracy_one_at_a_time(model))
            for name, model in models.items()}
for name, (forced, generating) in accuracy.items():
    print(f"{name:>11}: teacher-forced {forced:6.1%}   one token at a time {generating:6.1%}")
with torch.no_grad():
    models["no mask"](test[:, :-1])                 # one teacher-forced pass: fills .attn
next_weights = models["no mask"].attention.attn     # (n, h, T-1, T-1)
t = torch.arange(T_seq - 2)                         # queries 0 .. T-3: each has a key t + 1
on_next = next_weights[:, :, t, t + 1].mean(dim=(0, 2)).tolist()   # one share per head
print("    no mask: each head's share of weight on key t + 1:",
      ", ".join(f"{share:.1%}" for share in on_next))

# %% [markdown]
# Without the mask the model is right far above chance, on data that cannot be predicted:
# it learned to attend to position $t + 1$ and copy the token there (its two heads put
# {{ on_next[0]:.1% }} and {{ on_next[1]:.1% }} of their weight on key $t + 1$, averaged over
# the test sequences and the queries that have one; printed above, checked below). Only the last position
# has nothing to copy (its target $x_{T-1}$ is not in the input), so a perfect copier is
# expected to score $\frac{6}{7} \cdot 100\% + \frac{1}{7} \cdot 12.5\% = 87.5\%$ (an
# expectation: on a finite test set its guesses at the last position can be right a little
# more or less often than 1 in 8), and the model reaches
# {{ open_forced:.1% }}.
# The moment it has to generate, the token to copy does not exist, and it falls back to
# chance.
#
# With the mask the model cannot cheat: it is at chance, as it must be, and its accuracy is
# the same whether it sees the whole sequence or only the prefix, because its output at $t$
# never depended on anything after $t$. (These numbers come from training and move a little
# from machine to machine; the claims, checked:)

# %%
(masked_forced, masked_generating), (open_forced, open_generating) = accuracy.values()
print("no mask: every head puts over 90% of its weight on key t + 1:",
      all(share > 0.9 for share in on_next))
print("no mask, teacher-forced: within 1 point of a perfect copier's 87.5%, on unpredictable data:",
      abs(open_forced - 0.875) < 0.01)
print("no mask, one token at a time: no better than chance (below 20%):", open_generating < 0.2)
print("causal mask: at chance (below 20%) both ways, and the same both ways (within 1 point):",
      max(masked_forced, masked_generating) < 0.2 and abs(masked_forced - masked_generating) < 0.01)

# %% [markdown]
# ## 2. Exercise: `causal_mask`
#
# Row $t$ of the mask is query $t$; column $s$ is key $s$. Query $t$ may attend to key $s$
# exactly when $s \le t$: itself and the past.
#
# $$
# \text{causal}[t, s] = \begin{cases} \text{True} & s \le t \\ \text{False} & s > t \end{cases}
# \qquad\text{for } T = 4:\qquad
# \begin{pmatrix} 1 & 0 & 0 & 0 \\ 1 & 1 & 0 & 0 \\ 1 & 1 & 1 & 0 \\ 1 & 1 & 1 & 1 \end{pmatrix}
# $$
#
# Write `causal_mask(T)`: a **bool** tensor of shape $(T, T)$, True on and below the
# diagonal. The diagonal is True: position $t$ sees its own token (it predicts the *next*
# one). Bool and nothing else: our attention reads the mask with
# `scores.masked_fill(~mask, float("-inf"))`, and `~` and `masked_fill` want a bool tensor.
# One line does it: `torch.tril` of a square of ones, or a comparison of two `torch.arange`s.

# %%
def causal_mask(T):
    ### BEGIN SOLUTION
    return torch.ones(T, T, dtype=torch.bool).tril()   # (T, T): True where key s <= query t
    ### END SOLUTION


# %% [markdown]
# The checker tries $T = 1, 2, 5, 8$ and names the usual mistakes: the upper triangle, the
# diagonal left out, the mask inverted, a 0/1 or an additive float mask.

# %%
check.causal_mask(causal_mask)

# %% [markdown]
# From here on, the course's version: `course.masking.causal_mask(T)`.

# %%
from course.masking import causal_mask

T = 6
fig, ax = plt.subplots(figsize=(4.2, 3.6))
draw_mask(ax, causal_mask(T), f"causal_mask({T}): query t sees keys 0..t")
plt.show()

# %% [markdown]
# ## 3. No leak from the future, checked with autograd
#
# "Position $t$ does not see the future" has a precise meaning: the output at $t$ does not
# change when any input after $t$ changes. In derivatives, for self-attention
# $y = \operatorname{MultiHead}(x, x, x)$ over positions $0 \dots T - 1$:
#
# $$
# \frac{\partial y_t}{\partial x_s} = 0 \quad \text{for every } s > t, \text{ at every input } x .
# $$
#
# (And the past does reach it: $\partial y_t / \partial x_s \ne 0$ for $s \le t$, a separate
# fact, which says the layer uses what it may see.) Autograd computes these derivatives at
# one input: `torch.autograd.functional.jacobian` returns $\partial y_{t,i} / \partial
# x_{s,j}$ for every output feature $i$ and input feature $j$. We add up their sizes into one
# number per pair of positions, $\sum_{i,j} \lvert \partial y_{t,i} / \partial x_{s,j}
# \rvert$, for a multi-head attention layer with the causal mask and without it, at one
# random input, in float32 (the precision the course trains in). One input is an
# illustration, not a proof; the paragraph after the checks says why the zeros hold at
# every input.

# %%
seed_everything(0)
T = 6
attention = MultiHeadAttention(d_model, n_heads)
x = torch.randn(1, T, d_model)                                       # (B=1, T, d_model)


def influence(mask):
    """(T_out, T_in): the summed |d y_t,i / d x_s,j| over the features i and j."""
    jacobian = torch.autograd.functional.jacobian(
        lambda x: attention(x, x, x, mask=mask), x)                  # (1, T, d, 1, T, d)
    return jacobian[0, :, :, 0].abs().sum(dim=(1, 3))                # (T, d, T, d) -> (T, T)


with_mask, without_mask = influence(causal_mask(T)), influence(None)
zero_is_white = plt.get_cmap("viridis").with_extremes(bad="white")  # log(0) is "bad": white
fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
for ax, grid, title in [(axes[0], with_mask, "with the causal mask"),
                        (axes[1], without_mask, "without a mask")]:
    image = ax.imshow(grid, cmap=zero_is_white, norm=LogNorm(vmin=1, vmax=30))
    ax.set_xlabel("input position s")
    ax.set_ylabel("output position t")
    ax.set_title(f"$\\sum |\\partial y_t / \\partial x_s|$, {title}", fontsize=10)
    colorbar = fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    colorbar.set_label("sum of |gradient| (log scale)\nwhite: exactly 0")
plt.tight_layout()
plt.show()

# %%
future = ~causal_mask(T)                                             # (T, T): True where s > t
print("with the mask, every gradient from the future is exactly 0:", bool((with_mask[future] == 0).all()))
print("with the mask, every gradient from the past and present is non-zero:",
      bool((with_mask[~future] > 0).all()))
print("without a mask, the future reaches every output:", bool((without_mask[future] > 0).all()))

# %% [markdown]
# Exactly zero, not just small, and at every input, in any precision: a masked score is
# replaced by $-\infty$, its weight is $e^{-\infty} = 0$ exactly, so the later values are
# multiplied by 0, and `masked_fill`'s backward pass sends nothing to the score it replaced
# (lesson 03). The rest of a Transformer (layer norm, the feed-forward network,
# lessons 07-08) works on each position on its own, so a stack of such layers keeps this
# property: the mask in every self-attention layer is all it takes.

# %% [markdown]
# ## 4. Batches of sentences of different lengths
#
# Sentences come in different lengths, and a batch is one $(B, T)$ tensor of token ids. The
# short sentences are filled up with a **pad** token. Its id is whatever the vocabulary says:
# BERT's vocabulary has `[PAD]` at 0, fairseq's has `<pad>` at 1. The course's own
# vocabularies (`course.data`, lessons 09-12; lesson 08's small example follows the same
# layout) have `<pad>` at 0 and `<bos>` at 1; this
# section's small vocabulary follows fairseq instead, `<s>` (start of sentence, a real token)
# at 0 and `<pad>` at 1, so that code assuming a pad id of 0 would show here. The pad id is
# always an argument, never an assumed 0.

# %%
vocab = ["<s>", "<pad>", "</s>", "the", "cat", "sat", "on", "mat", "a", "dog", "barked",
         "bird", "sang", "loudly"]
PAD_ID = vocab.index("<pad>")                                        # 1
print("pad id: here", PAD_ID, "| course.data", course_data.PAD_ID)
sentences = ["<s> the cat sat on the mat", "<s> a dog barked", "<s> the bird sang loudly"]
ids = [torch.tensor([vocab.index(word) for word in s.split()]) for s in sentences]
tokens = pad_sequence(ids, batch_first=True, padding_value=PAD_ID)  # (B, T): padded at the end
B, T = tokens.shape
print("lengths:", [len(i) for i in ids], " batch:", tuple(tokens.shape))
print(tokens)

# %% [markdown]
# `<pad>` is a token like any other to the network: it has an embedding, so a key and a
# value, and the softmax gives it weight. Take the second sentence, "<s> a dog barked", once
# on its own and once as it sits in the batch, with three pads after it, and compare the
# outputs of its four real tokens under the same attention layer.

# %%
seed_everything(0)
d_model, n_heads = 8, 2
embed = nn.Embedding(len(vocab), d_model)
mha = MultiHeadAttention(d_model, n_heads)
words = [vocab[i] for i in tokens[1]]                                # the labels of sentence 1


def outputs(token_ids, mask=None):
    """Self-attention over the embedded tokens: (B, T) -> (B, T, d_model); weights in mha.attn."""
    with torch.no_grad():
        x = embed(token_ids)                                         # (B, T, d_model)
        return mha(x, x, x, mask=mask)                               # (B, T, d_model)


alone = outputs(ids[1][None])                                        # (1, 4, d_model): no padding
in_batch = outputs(tokens)                                           # (B, T, d_model): no mask
weight_on_pads = mha.attn[1, :, :4, 4:].sum(dim=-1).mean().item()    # real queries -> pad keys
print(f"outputs of the 4 real tokens, alone vs in the batch: max |difference| {gap(in_batch[1, :4], alone[0])}")
print(f"share of their attention that goes to the 3 pads: {weight_on_pads:.0%}")

# %% [markdown]
# The same sentence gives different outputs depending on which batch it was put in: how long
# the longest sentence was decides how many pads it gets, and the pads take a share of every
# real token's attention. The pads must be hidden as keys. That is the padding mask.

# %% [markdown]
# ## 5. Exercise: `padding_mask`
#
# Write `padding_mask(tokens, pad_id)`: `tokens` is a $(B, T)$ integer tensor; return a
# **bool** tensor of shape $(B, 1, 1, T)$, True where the token is real (not `pad_id`).
#
# - Find the padding **by value**, `tokens != pad_id`, wherever it is: some batches pad at
#   the start, and a length-based rule ("the first $n$ are real") breaks there.
# - Why $(B, 1, 1, T)$? The scores are $(B, h, T_q, T_k)$, and the mask hides *keys*, the
#   last axis. Broadcasting lines shapes up from the right, so a $(B, T)$ mask would put its
#   $T$ against $T_k$ (right) and its $B$ against $T_q$ (wrong): an error when $B \ne T_q$,
#   and silently wrong numbers when they happen to be equal. The two unit axes say "the same
#   for every head and every query":

# %%
scores = torch.randn(B, n_heads, T, T)                               # (B, h, T_q, T_k)
for shape in [(B, T), (B, 1, 1, T)]:
    try:
        print(f"mask {shape} against scores {tuple(scores.shape)}: broadcasts to",
              tuple(torch.broadcast_shapes(shape, scores.shape)))
    except RuntimeError as error:
        print(f"mask {shape} against scores {tuple(scores.shape)}: {error}")


# %%
def padding_mask(tokens, pad_id):
    ### BEGIN SOLUTION
    is_real = tokens != pad_id                        # (B, T)
    return is_real[:, None, None, :]                  # (B, T) -> (B, 1, 1, T)
    ### END SOLUTION


# %% [markdown]
# The checker uses pad ids other than 0 (with 0 a real token), padding at the end, at the
# start and in between, a batch of one, `int32` and non-contiguous tokens; and it checks that
# your function leaves `tokens` as it found them.

# %%
check.padding_mask(padding_mask)

# %% [markdown]
# From here on, the course's version: `course.masking.padding_mask(tokens, pad_id)`.

# %%
from course.masking import padding_mask

mask = padding_mask(tokens, PAD_ID)                                  # (B, 1, 1, T)
fig, ax = plt.subplots(figsize=(6, 2.6))
draw_mask(ax, mask[:, 0, 0], f"padding_mask(tokens, pad_id={PAD_ID}): one row per sentence",
          xlabel="position (a key)", ylabel="sentence")
plt.show()

# %% [markdown]
# With the mask, the sentence's real tokens give what they give on their own, whatever the
# padding. Adding more and more pads to "<s> a dog barked":

# %%
sentence = ids[1]                                                    # (4,)
equal_with_mask, masked_by_pads = [], []
print("pads   no mask: max |change|  weight on pads    with the mask: max |change|")
for n_pads in range(6):
    padded = torch.cat([sentence, torch.full((n_pads,), PAD_ID)])[None]   # (1, 4 + n_pads)
    unmasked = outputs(padded)[0, :4]                                # (4, d_model)
    on_pads = mha.attn[0, :, :4, 4:].sum(dim=-1).mean().item()
    masked = outputs(padded, padding_mask(padded, PAD_ID))[0, :4]    # (4, d_model)
    equal_with_mask.append(torch.allclose(masked, alone[0], atol=1e-6))
    masked_by_pads.append(masked)
    print(f"{n_pads:>4} {gap(unmasked, alone[0]):>22} {on_pads:>15.0%} {gap(masked, alone[0]):>30}")
print("with the mask, equal to the sentence alone for every amount of padding:", all(equal_with_mask))

# %% [markdown]
# Without the mask, every pad takes weight and moves the outputs further; with it, the
# difference is at most float32 rounding for any number of pads. It can be nothing at
# all: a masked pad's weight is exactly 0, so it adds exactly 0 to every sum. But the
# matrix products now have other sizes, and a matrix library may add the same real terms in
# another order for another size, which can change the last bit. So the test above allows
# $10^{-6}$, and "bit for bit" is a fact about one machine:

# %% tags=["nbval-ignore-output"]
bit_equal = [torch.equal(masked, alone[0]) for masked in masked_by_pads]
print(f"with the mask, bit for bit equal to the sentence alone: {sum(bit_equal)} of "
      f"{len(bit_equal)} amounts of padding")

# %% [markdown]
# In the run stored with this notebook, {{ sum(bit_equal) }} of the {{ len(bit_equal) }}
# amounts of padding (0 to 5 pads) gave the sentence alone's outputs to the last bit. The weights show why the
# pads drop out, for sentence 1 of the batch, head 0:

# %%
fig, axes = plt.subplots(1, 2, figsize=(12, 4.4))
for ax, (title, mask) in zip(axes, [("no mask", None), ("padding mask", padding_mask(tokens, PAD_ID))]):
    outputs(tokens, mask)                                            # keeps the weights in mha.attn
    attention_heatmap(mha.attn[1, 0], words, words, ax=ax, title=f"sentence 1, head 0, {title}")
plt.tight_layout()
plt.show()

# %% [markdown]
# With the mask the three pad columns are exactly 0 and each real row shares its weight among
# the four real keys, as when the sentence is alone. The pad *rows* (queries) still get
# outputs, from the real keys: they are meaningless, and nothing uses them. A loss skips
# those positions (lesson 09: `ignore_index` in the cross-entropy).

# %% [markdown]
# ## 6. Both masks at once: the decoder's mask
#
# A decoder's self-attention over a padded batch of target sentences needs both: a key must
# be real **and** not in the future. Combine with `&`, and broadcasting builds the full mask
# from two small ones:
#
# | mask | shape | aligned from the right |
# |---|---|---|
# | padding | $(B, 1, 1, T)$ | $B$, heads, queries, **keys** |
# | causal | $(T, T)$ | **queries**, **keys** |
# | padding & causal | $(B, 1, T, T)$ | $B$, heads, queries, keys |
# | scores | $(B, h, T_q, T_k)$ | the head axis of size 1 repeats $h$ times |
#
# `course.masking.decoder_mask(tokens, pad_id)` is exactly this.

# %%
from course.masking import decoder_mask

padding, causal = padding_mask(tokens, PAD_ID), causal_mask(T)      # (B, 1, 1, T), (T, T)
combined = padding & causal                                          # (B, 1, T, T)
print("padding", tuple(padding.shape), "& causal", tuple(causal.shape), "->", tuple(combined.shape))
print("against scores", tuple(scores.shape), "->",
      tuple(torch.broadcast_shapes(combined.shape, scores.shape)))
print("decoder_mask(tokens, pad_id) is padding & causal:",
      torch.equal(decoder_mask(tokens, PAD_ID), combined))

# %% [markdown]
# For one sentence, "<s> a dog barked" with its three pads: the padding mask repeated over
# the queries, the causal mask, and what `&` leaves.

# %%
fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
draw_mask(axes[0], padding[1, 0].expand(T, T), "padding (1, 1, T), repeated over queries",
          words, words)
draw_mask(axes[1], causal, "causal (T, T)", words, words)
draw_mask(axes[2], combined[1, 0], "padding & causal: sentence 1", words, words)
plt.tight_layout()
plt.show()

# %% [markdown]
# And the whole $(B, h, T_q, T_k)$ mask the attention sees, one panel per sentence and head:
# the heads share their sentence's mask, the sentences do not.

# %%
full = combined.expand(B, n_heads, T, T)                             # (B, h, T_q, T_k), no copy
fig, axes = plt.subplots(n_heads, B, figsize=(13, 7), layout="constrained")
for b in range(B):
    for j in range(n_heads):
        draw_mask(axes[j, b], full[b, j], f"sentence {b}, head {j}", colorbar=False)
bar = fig.colorbar(axes[0, 0].images[0], ax=axes, ticks=[0, 1], shrink=0.6)  # one for all
bar.ax.set_yticklabels(["False", "True"])
bar.set_label("may attend")
fig.suptitle("The decoder's mask (B, h, T_q, T_k) = padding (B, 1, 1, T) & causal (T, T)")
plt.show()

# %% [markdown]
# ### A query that may attend to nothing
#
# Padded at the end, every query has at least key 0 to look at. Some batches are padded at
# the **start** instead (left padding, common when a decoder generates a batch of prompts
# side by side, so that they all end at the same position). Then a short sentence starts
# with pads, and the causal mask lets each of them see only itself and the positions before
# it, all of them pads: their rows of the mask are all False (below, queries 0 and 1).
#
# Lesson 03 settled what happens then: `course.attention.scaled_dot_product_attention` gives
# such a row zero weights and a zero output, as `F.scaled_dot_product_attention` does.
# `nn.MultiheadAttention` gives NaN there (we convert the mask for it in section 7).

# %%
from course.masking import to_torch_attn_mask

left_padded = torch.tensor([[PAD_ID, PAD_ID, 0, 8, 9, 10]])          # (1, T): "<pad> <pad> <s> a dog barked"
mask = decoder_mask(left_padded, PAD_ID)                             # (1, 1, T, T)
print("query 0 may attend to:", mask[0, 0, 0].tolist())
print("queries that may attend to nothing:", (~mask[0, 0].any(dim=-1)).nonzero().flatten().tolist())
x = embed(left_padded).detach()                                      # (1, T, d_model)
q = k = v = x[:, None]                                               # (1, 1, T, d_model): one head
_, weights = scaled_dot_product_attention(q, k, v, mask)             # (1, 1, T, T)
print("course.attention: weights of query 0:", weights[0, 0, 0].tolist())
theirs = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
out, _ = theirs(x, x, x, attn_mask=to_torch_attn_mask(mask, n_heads))
print("nn.MultiheadAttention: output of query 0:", out[0, 0, :3].tolist(), "...")

# %% [markdown]
# ## 7. Two conventions: True = may attend, True = masked out
#
# Our masks say where a query **may** attend. So does `F.scaled_dot_product_attention` (a
# boolean `attn_mask`). `nn.MultiheadAttention` and the `nn.Transformer` modules read
# booleans the other way round, and also take float masks that are *added* to the scores:
#
# | where | argument | True means | float mask |
# |---|---|---|---|
# | `course.attention`, `course.multihead` | `mask` | may attend | not accepted |
# | `F.scaled_dot_product_attention` | `attn_mask` | may attend | added to the scores |
# | `nn.MultiheadAttention` | `attn_mask` $(T_q, T_k)$ or $(B \cdot h, T_q, T_k)$ | **masked out** | added to the scores |
# | `nn.MultiheadAttention` | `key_padding_mask` $(B, T_k)$ | **padding** (masked out) | added to the scores |
# | `nn.Transformer`, `nn.TransformerEncoder(Layer)`, `nn.TransformerDecoder(Layer)` | `src_mask`, `tgt_mask`, `memory_mask` (`mask` on `nn.TransformerEncoder`), the same shapes as `attn_mask` | **masked out** | added to the scores |
# | the same | `src_key_padding_mask`, `tgt_key_padding_mask`, `memory_key_padding_mask` $(B, T_k)$ | **padding** (masked out) | added to the scores |
#
# The `nn.Transformer` modules hand each mask to the `nn.MultiheadAttention` inside them
# (`src_mask` to the encoder's self-attention, `tgt_mask` to the decoder's,
# `memory_mask` to its cross-attention), so they read the same way; only the names differ,
# and none of them is `attn_mask`: `nn.Transformer(...)(src, tgt, attn_mask=...)` is a
# `TypeError`. The names, read from each `forward`'s signature:

# %%
import inspect

for module in (nn.MultiheadAttention, nn.Transformer, nn.TransformerEncoder,
               nn.TransformerEncoderLayer, nn.TransformerDecoder, nn.TransformerDecoderLayer):
    masks = [name for name in inspect.signature(module.forward).parameters if name.endswith("mask")]
    print(f"{module.__name__ + '.forward':>33}: {', '.join(masks)}")

# %% [markdown]
# `nn.Transformer.generate_square_subsequent_mask(T)` builds the causal mask as a float mask:
# $0$ where allowed, $-\infty$ where not.

# %%
print(nn.Transformer.generate_square_subsequent_mask(4))
print("== 0 gives ours:", torch.equal(nn.Transformer.generate_square_subsequent_mask(4) == 0,
                                      causal_mask(4)))

# %% [markdown]
# `course.masking` has the converters, one line each at heart (`~mask`):
#
# - `to_torch_attn_mask(mask)`: ours $(T_q, T_k)$ $\to$ torch's `attn_mask`; a batched mask
#   $(B, 1 \text{ or } h, T_q, T_k)$ needs `n_heads`, because torch stacks one slice per
#   sentence and head, $(B \cdot h, T_q, T_k)$;
# - `to_torch_key_padding_mask(mask)`: ours $(B, 1, 1, T_k)$ $\to$ torch's `key_padding_mask`
#   $(B, T_k)$;
# - `from_torch_attn_mask` and `from_torch_key_padding_mask` go back.
#
# The check that they are right: torch's layer and ours, with the same weights (copied by
# lesson 04's `load_from_torch`), on the padded batch, must agree, each given the mask in
# its own convention. And the same comparison with the mask *not* converted.

# %%
from course.masking import to_torch_key_padding_mask
from course.multihead import load_from_torch

seed_everything(0)
theirs = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
with torch.no_grad():
    for p in theirs.parameters():        # torch starts its biases at 0: make every number count
        p.normal_(std=0.3)
ours = load_from_torch(MultiHeadAttention(d_model, n_heads), theirs)
x = embed(tokens).detach()                                           # (B, T, d_model)
padding, causal, both = padding_mask(tokens, PAD_ID), causal_mask(T), decoder_mask(tokens, PAD_ID)
cases = [
    ("padding", padding, {"key_padding_mask": to_torch_key_padding_mask(padding)}),
    ("causal", causal, {"attn_mask": to_torch_attn_mask(causal)}),
    ("padding & causal", both, {"attn_mask": to_torch_attn_mask(both, n_heads)}),
    ("causal, not converted", causal, {"attn_mask": causal}),
]
with torch.no_grad():
    for name, mask, their_masks in cases:
        got = ours(x, x, x, mask=mask)                               # (B, T, d_model)
        want, _ = theirs(x, x, x, **their_masks)                     # (B, T, d_model)
        print(f"{name:>22}: equal {torch.allclose(got, want, atol=1e-6)}, "
              f"NaN in torch's output: {want.isnan().any().item()}")

# %% [markdown]
# Converted, the two agree on every mask. Not converted, torch reads our causal mask as
# "hide the past and the present": every query sees only its future, and the last query,
# with no future, sees nothing at all and gets NaN. A mask in the wrong convention does not
# fail loudly; it makes the model attend to exactly what it should not. When you pass a mask
# to a library, check which way round it reads it.
#
# ## What's next
#
# With masks, attention can work on real batches and a decoder can be trained without
# cheating. One attention layer is not a Transformer yet: lesson 07 wraps it into an encoder
# layer, with a residual connection, layer normalisation and a feed-forward network, and
# shows why deep stacks need the first two.
