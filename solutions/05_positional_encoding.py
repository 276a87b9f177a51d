# %% [markdown]
# # 05 · Positional encoding
#
# **The idea.** Attention compares every query with every key and averages the values. Nothing
# in that computation says which key came first: it treats a sequence as a *set*. Shuffle the
# words and every word gets the same answer as before (up to float rounding), only in the
# shuffled order.
# "dog bites man" and "man bites dog" look the same to it. The Transformer (Vaswani et al.,
# 2017, "Attention Is All You Need") fixes this by adding to each word's embedding a vector
# that depends on the word's position: the **positional encoding**.
#
# In this lesson you will
# 1. derive that self-attention without positions (and without a mask) is
#    permutation-equivariant, check it numerically, and see what a causal mask changes;
# 2. meet the paper's sinusoidal encoding, work one entry by hand, and write
#    `sinusoidal_encoding(max_len, d_model)`;
# 3. look at it: a heatmap, its waves from wavelength $2\pi$ to almost $10000 \cdot 2\pi$, and
#    the dot product $PE(p) \cdot PE(p+k)$, which depends on $k$ alone;
# 4. show that moving $k$ positions on is one fixed rotation, $PE(pos+k) = M_k\, PE(pos)$,
#    the same matrix for every $pos$;
# 5. build the model's input layer: token embeddings scaled by $\sqrt{d_{model}}$, positions
#    added, dropout; and watch the order come back;
# 6. compare with *learned* position embeddings (BERT, GPT), and see what each kind does at a
#    position longer than any seen in training;
# 7. look ahead at rotary position embeddings, which rotate queries and keys instead, so that
#    $q \cdot k$ depends only on the offset between the two positions.

# %%
import math

import matplotlib.pyplot as plt
import torch
from torch import nn

from course import check
from course.multihead import MultiHeadAttention
from course.utils import gap, seed_everything

seed_everything(0)
torch.set_printoptions(precision=3, sci_mode=False)

# %% [markdown]
# ## 1. Attention is order-blind
#
# Write the $T$ input vectors of a sequence as the rows of $X$ $(T, d_{model})$, and let $P$ be
# a permutation matrix: $PX$ is the same rows in another order. Self-attention computes
# $Q = XW_Q$, $K = XW_K$, $V = XW_V$, all row by row, so the shuffled input gives $PQ$, $PK$,
# $PV$. Its scores are
#
# $$
# (PQ)(PK)^\top = P\,(QK^\top)\,P^\top ,
# $$
#
# the same scores with rows *and* columns shuffled alike. The softmax works on each row on its
# own and does not care in which order a row's entries come, so
# $\operatorname{softmax}(P S P^\top) = P \operatorname{softmax}(S) P^\top$, and
#
# $$
# \operatorname{Attention}(PX) = P \operatorname{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right)
# P^\top P V = P \operatorname{Attention}(X), \qquad \text{since } P^\top P = I .
# $$
#
# Shuffling the input only shuffles the output: attention is **permutation-equivariant**. The
# output projection $W_O$ acts on each row alone and keeps this, and so does every
# position-wise layer the Transformer adds later. Let's see it on three words, with lesson 04's
# `MultiHeadAttention`.

# %%
d_model = 8
words = ["dog", "bites", "man"]
embed = nn.Embedding(len(words), d_model)            # one learned vector per word, no positions
mha = MultiHeadAttention(d_model, n_heads=2).eval()


def tokens_of(sentence):
    return torch.tensor([[words.index(w) for w in sentence.split()]])   # (1, T)


def self_attend(x):
    with torch.no_grad():
        return mha(x, x, x)[0]                       # (1, T, d_model) -> (T, d_model)


out_a = self_attend(embed(tokens_of("dog bites man")))   # (3, d_model)
out_b = self_attend(embed(tokens_of("man bites dog")))   # (3, d_model)
print("'dog' in 'dog bites man':", out_a[0])
print("'dog' in 'man bites dog':", out_b[2])

# %% [markdown]
# The word "dog" gets the same vector whether it bites or is bitten. The whole output of the
# second sentence is the first one's, rows reversed; and a random shuffle of a longer random
# sequence gives the same picture:

# %%
reverse = [2, 1, 0]                                   # sentence b is sentence a backwards
print("out(man bites dog) == out(dog bites man) reversed, largest difference:",
      gap(out_b, out_a[reverse]))
sentence_gap = (out_b - out_a[reverse]).abs().max().item()     # kept for the text below

x = torch.randn(1, 10, d_model)                      # (B=1, T=10, d_model)
shuffle = torch.randperm(10)                         # a random order of the 10 positions
print("out(x shuffled) == out(x) shuffled, largest difference:",
      gap(self_attend(x[:, shuffle]), self_attend(x)[shuffle]))
shuffle_gap = (self_attend(x[:, shuffle]) - self_attend(x)[shuffle]).abs().max().item()
print("for scale, two different positions' outputs differ by up to",
      f"{(self_attend(x)[0] - self_attend(x)[1]).abs().max().item():.1f}")

# %% [markdown]
# The maths above is exact; in floating point the sums over the keys run in another order,
# so the two agree to float32 rounding, not always to the last bit: the largest differences
# printed as "< 1e-6" were {{ sentence_gap:.1e }} for the sentences and
# {{ shuffle_gap:.1e }} for the random shuffle in the run stored with this notebook (one
# float32 step near 1 is $2^{-23} \approx 1.2 \times 10^{-7}$).
#
# So self-attention without a mask, and the position-wise layers around it (an encoder's
# layers), cannot know where a word stands unless the input tells them. A decoder's causal
# mask (lesson 06: query $t$ sees keys $0 \dots t$ only) breaks the symmetry a little. Query 0
# sees only itself and query $t$ averages over $t + 1$ keys, so the outputs do change when
# the words move, and decoders trained with no positional encoding at all pick up position
# from this (Haviv et al., 2022, "Transformer Language Models without Positional Encodings
# Still Learn Positional Information"). What the mask does not tell an attention layer whose
# inputs carry no positions is which of the keys a query sees is which: shuffle those keys
# and the query's output stays the same. Both, checked on the same ten vectors, with the
# causal mask:

# %%
causal = torch.ones(10, 10, dtype=torch.bool).tril()  # (T, T): query t may attend to keys 0..t


def causal_attend(x):
    with torch.no_grad():
        return mha(x, x, x, mask=causal)[0]          # (1, T, d_model) -> (T, d_model)


print("causal mask: out(x shuffled) == out(x) shuffled (within 1e-5):",
      torch.allclose(causal_attend(x[:, shuffle]), causal_attend(x)[shuffle], atol=1e-5))
keys_0_to_8_reversed = list(range(8, -1, -1)) + [9]  # positions 8, 7, ..., 0, then 9 in place
print("causal mask: the last query's output with keys 0..8 in reverse order == as before:",
      gap(causal_attend(x[:, keys_0_to_8_reversed])[9], causal_attend(x)[9]))

# %% [markdown]
# So a causal mask gives a model a rough sense of place, which it has to learn to extract
# over its layers; one such layer on its own cannot pick out "the key just before me" or "the
# first key". The paper gives the layers positions directly: add to the embedding of the
# word at position $pos$ a vector $PE(pos)$ that is different for every position. (The
# causal models of lessons 04 and 06 do the same with a learned vector per position,
# section 7's kind.) Then the same word at two places is two different inputs.

# %% [markdown]
# ## 2. The sinusoidal encoding
#
# The paper's $PE(pos)$ has $d_{model}$ entries, grouped in pairs $(2i, 2i+1)$ for
# $i = 0, 1, \dots$: pair $i$ holds the sine and the cosine of one angle that grows with the
# position at the pair's own rate $\omega_i$:
#
# $$
# PE(pos, 2i) = \sin\!\left(\frac{pos}{10000^{2i/d_{model}}}\right), \qquad
# PE(pos, 2i+1) = \cos\!\left(\frac{pos}{10000^{2i/d_{model}}}\right), \qquad
# \omega_i = \frac{1}{10000^{2i/d_{model}}} .
# $$
#
# - Both dimensions of a pair share one frequency: the exponent is $2i/d_{model}$, with $2i$
#   the *even* dimension of the pair (0, 2, 4, ...), not the index of each dimension.
# - $\omega_0 = 1$: the first pair turns once every $2\pi \approx 6.3$ positions. Each next
#   pair turns slower, by the same factor, down to $10000^{-(d_{model}-2)/d_{model}}$ for the
#   last one: nearly $1/10000$ when $d_{model}$ is large (a wavelength just under
#   $10000 \cdot 2\pi \approx 62{,}832$ positions; section 4 prints it for
#   $d_{model} = 512$), but $0.001$ at $d_{model} = 8$.
# - Position 0 is $(0, 1, 0, 1, \dots)$: $\sin 0 = 0$, $\cos 0 = 1$.
# - An odd $d_{model}$ has one more even dimension than odd ones: its last dimension is a sine
#   whose cosine partner would be dimension $d_{model}$, which does not exist.
#
# With $d_{model} = 8$ the numbers are round: $10000^{2i/8} = 10^i$, so $\omega_i = 1, 0.1,
# 0.01, 0.001$. Position 3, pair 1 (dimensions 2 and 3), by hand:

# %%
pos, i, d = 3, 1, 8
omega = 1 / 10000 ** (2 * i / d)                     # 10000^(2/8) = 10, so omega = 0.1
print(f"omega_{i} = {omega:.3g}, angle = pos * omega = {pos * omega:.3g}")
print(f"PE({pos}, {2 * i}) = sin({pos * omega:.3g}) = {math.sin(pos * omega):.4f}")
print(f"PE({pos}, {2 * i + 1}) = cos({pos * omega:.3g}) = {math.cos(pos * omega):.4f}")

# %% [markdown]
# ## 3. Exercise: `sinusoidal_encoding`
#
# Write `sinusoidal_encoding(max_len, d_model)`: return the table whose row $pos$ is
# $PE(pos)$, for $pos = 0, \dots, max\_len - 1$: shape $(max\_len, d_{model})$, float32 (the
# dtype of the embeddings it will be added to), sines in the even columns, cosines in the odd
# ones.
#
# Hints: `torch.arange(max_len)` gives the positions and `torch.arange(0, d_model, 2)` the
# $2i$ of every pair; broadcasting a $(max\_len, 1)$ column against a row of frequencies gives
# every angle at once. `pe[:, 0::2]` and `pe[:, 1::2]` are the even and the odd columns. Make
# sure an odd $d_{model}$ works (for $d_{model} = 7$: four sines, three cosines).

# %%
def sinusoidal_encoding(max_len, d_model):
    ### BEGIN SOLUTION
    position = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)  # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)           # (ceil(d_model / 2),)
    angle = position / 10000 ** (two_i / d_model)                     # (max_len, ceil(d_model / 2))
    pe = torch.zeros(max_len, d_model)                                # (max_len, d_model)
    pe[:, 0::2] = torch.sin(angle)                                    # even dimensions: sin
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])                 # odd: one fewer if d_model is odd
    return pe
    ### END SOLUTION


# %%
check.sinusoidal_encoding(sinusoidal_encoding)

# %% [markdown]
# From here on we use the course's version (so the notebook runs even before your answer is
# done). It computes the angles in float64 and rounds once at the end.

# %%
from course.positional import frequencies, sinusoidal_encoding

pe = sinusoidal_encoding(100, 64)                    # (max_len=100, d_model=64)
print(pe.shape, pe.dtype)
print("PE(3) for d_model = 8:", sinusoidal_encoding(4, 8)[3])

# %% [markdown]
# ## 4. What the table looks like
#
# Each row is one position, each column one dimension. On the left the fast pairs flicker from
# row to row; towards the right the pairs turn so slowly that over 100 positions their sines
# hardly leave 0 and their cosines hardly leave 1.

# %%
fig, ax = plt.subplots(figsize=(7, 4.5))
image = ax.imshow(pe, cmap="RdBu", vmin=-1, vmax=1, aspect="auto")
ax.set_xlabel("dimension j (even: sin, odd: cos)")
ax.set_ylabel("position pos")
ax.set_title("Sinusoidal positional encoding, d_model = 64, positions 0 to 99")
colorbar = fig.colorbar(image, ax=ax)
colorbar.set_label("PE(pos, j)")
plt.show()

# %% [markdown]
# A few columns as curves, and every pair's wavelength $2\pi/\omega_i$ for the paper's
# $d_{model} = 512$: a geometric progression, a straight line on a log scale, from $2\pi$ to
# just under $10000 \cdot 2\pi$.

# %%
fig, axes = plt.subplots(1, 2, figsize=(12, 3.8))
positions = torch.arange(200)
long_table = sinusoidal_encoding(200, 64)            # (200, 64)
for j in (0, 8, 20, 62):
    axes[0].plot(positions, long_table[:, j], label=f"dimension {j} (pair {j // 2})")
axes[0].set_xlabel("position pos")
axes[0].set_ylabel("PE(pos, j)")
axes[0].set_title("Four sine dimensions of d_model = 64")
axes[0].legend(fontsize=8, loc="lower left")
wavelength = 2 * math.pi / frequencies(512)          # (256,): one per pair
axes[1].semilogy(wavelength)
axes[1].axhline(2 * math.pi, color="gray", linestyle=":", label="2π")
axes[1].axhline(10000 * 2 * math.pi, color="gray", linestyle="--", label="10000 · 2π")
axes[1].set_xlabel("pair i (dimensions 2i, 2i + 1)")
axes[1].set_ylabel("wavelength 2π / ω_i (positions)")
axes[1].set_title("Wavelength of each pair, d_model = 512")
axes[1].legend(fontsize=8)
plt.tight_layout()
plt.show()
print(f"d_model = 512: shortest wavelength {wavelength[0]:.2f}, longest {wavelength[-1]:,.0f} "
      f"(10000 · 2π = {10000 * 2 * math.pi:,.0f})")

# %% [markdown]
# Like the hands of a clock, the fast pairs tell near positions apart and the slow pairs far
# ones: together they give every position up to tens of thousands its own vector.
#
# **Similarity depends on the distance only.** Take the dot product of two rows. Pair $i$
# contributes $\sin(p\omega_i)\sin((p+k)\omega_i) + \cos(p\omega_i)\cos((p+k)\omega_i) =
# \cos(k\omega_i)$, so
#
# $$
# PE(p) \cdot PE(p+k) = \sum_i \cos(k\,\omega_i),
# $$
#
# a function of the offset $k$ alone, the same wherever $p$ is, and the same for $-k$ as for
# $+k$. At $k = 0$ it is the squared length of every row, $d_{model}/2$.

# %%
table = sinusoidal_encoding(400, 64)                 # (400, 64)
offsets = torch.arange(-100, 101)                    # k = -100 .. 100
fig, ax = plt.subplots(figsize=(7, 3.8))
curves = {}
for p in (100, 150, 250):
    curves[p] = table[p + offsets] @ table[p]        # (201, 64) @ (64,) -> (201,)
    ax.plot(offsets, curves[p], label=f"p = {p}", linewidth=4 if p == 100 else 1.5)
ax.set_xlabel("offset k")
ax.set_ylabel("PE(p) · PE(p + k)")
ax.set_title("Dot product of two positions, d_model = 64: the same curve for every p")
ax.legend()
plt.show()
print("the same for every p:", all(torch.allclose(curves[p], curves[100], atol=1e-4)
                                   for p in curves))
print("the same for -k as for +k:", torch.allclose(curves[100], curves[100].flip(0), atol=1e-4))
print(f"at k = 0: {curves[100][100].item():.2f} = d_model / 2")
on_curve = curves[100][100:]                         # (101,): k = 0 .. 100
near = max(n for n in range(1, 100) if on_curve[1 : n + 1].min() > on_curve[n + 1 :].max())
print(f"the largest n for which every offset 1..n scores above every offset n+1..100: {near}")
print("offset 44 scores above offset 20:", bool(on_curve[44] > on_curve[20]))

# %% [markdown]
# The dot product is largest at $k = 0$, and only the nearest offsets stand out: on this curve
# ($d_{model} = 64$) every offset up to {{ near }} scores above every offset from {{ near + 1 }}
# to 100. Beyond that the fast pairs make the curve ripple, and distance no longer orders it:
# offset 44 scores {{ on_curve[44]:.1f }}, more than offset 20's {{ on_curve[20]:.1f }}. So a
# position looks most like its close neighbours, but among farther ones the dot product does
# not say which is nearer. It cannot tell *before* from *after*, either: $+k$ and $-k$ give
# the same number. The next section shows that the encoding does hold the direction; a dot
# product alone just cannot read it.

# %% [markdown]
# ## 5. Moving on by $k$ positions is a rotation
#
# Why sines *and* cosines? Because then moving $k$ positions on is a linear map, the same for
# every position. By the angle-addition formulas, for pair $i$ with $\omega = \omega_i$:
#
# $$
# \begin{pmatrix} \sin((pos+k)\,\omega) \\ \cos((pos+k)\,\omega) \end{pmatrix}
# =
# \begin{pmatrix} \cos k\omega & \sin k\omega \\ -\sin k\omega & \cos k\omega \end{pmatrix}
# \begin{pmatrix} \sin(pos\,\omega) \\ \cos(pos\,\omega) \end{pmatrix} .
# $$
#
# The $2 \times 2$ matrix is a rotation by the angle $k\omega$, and $pos$ appears nowhere in
# it. (Its minus sign sits below the diagonal, where section 8's rotation has it above,
# only because the pair is stored sine first: drawn with the cosine on the horizontal axis
# and the sine on the vertical, the point $(\cos pos\,\omega, \sin pos\,\omega)$ turns
# anticlockwise by $k\omega$, the same way as section 8's.) The paper chose the sinusoids
# for this reason: it hypothesised that a model could easily learn to attend by *relative*
# positions, since $PE(pos+k)$ is a linear function of
# $PE(pos)$ for any fixed offset $k$. Here is pair 1 of $d_{model} = 8$ ($\omega_1 = 0.1$),
# moved on by $k = 3$, at every position of a table at once:

# %%
k, omega = 3, 0.1
rotation = torch.tensor([[math.cos(k * omega), math.sin(k * omega)],
                         [-math.sin(k * omega), math.cos(k * omega)]])   # (2, 2)
small = sinusoidal_encoding(50, 8)                   # (50, 8)
pair_1 = small[:, 2:4]                               # (50, 2): (sin, cos) of pos * 0.1
moved = pair_1[:-k] @ rotation.T                     # (47, 2): each row rotated by k * omega
print("rotation @ PE(pos)[2:4] == PE(pos + 3)[2:4] for every pos, largest difference:",
      gap(moved, pair_1[k:]))

# %% [markdown]
# Stack one such rotation per pair on the diagonal and you have $M_k$, a
# $(d_{model}, d_{model})$ matrix with $PE(pos + k) = M_k\, PE(pos)$ for every $pos$:
# `course.positional.shift_matrix(k, d_model)` builds it. A negative $k$ moves back.

# %%
from course.positional import shift_matrix

M_3 = shift_matrix(3, 8)                             # (8, 8): four 2 x 2 rotations
fig, ax = plt.subplots(figsize=(5, 4), layout="constrained")
image = ax.imshow(M_3, cmap="RdBu", vmin=-1, vmax=1)
ax.set_xlabel("input dimension (PE(pos))")
ax.set_ylabel("output dimension (PE(pos + 3))")
ax.set_title("M_3 for d_model = 8: one rotation per pair")
colorbar = fig.colorbar(image, ax=ax)
colorbar.set_label("matrix entry")
plt.show()
for i, omega_i in enumerate(frequencies(8).tolist()):
    block = M_3[2 * i : 2 * i + 2, 2 * i : 2 * i + 2]  # (2, 2): pair i's rotation
    print(f"pair {i}: turns by 3 x {omega_i:g} = {3 * omega_i:g} rad, block "
          f"[[{block[0, 0]:6.3f}, {block[0, 1]:6.3f}], [{block[1, 0]:6.3f}, {block[1, 1]:6.3f}]]")

# %% [markdown]
# Pair 0 turns by 3 rad, almost half a turn (half a turn is $\pi \approx 3.14$ rad), so its
# block is close to $-I$; pair 1 turns by 0.3 rad, a visible tilt; the two slow pairs hardly
# turn in 3 positions, so their blocks are close to $I$. The same $M_k$, checked on the
# 64-dimensional table, for four offsets:

# %%
table = sinusoidal_encoding(400, 64)                 # (400, 64)
for k in (1, 7, 50, -20):
    M = shift_matrix(k, 64)                          # (64, 64)
    rows = range(max(0, -k), 400 - max(0, k))        # every pos with pos + k in the table
    shifted = table[list(rows)] @ M.T                # (n, 64): M_k PE(pos) for each row
    print(f"k = {k:>3}: M_k PE(pos) == PE(pos + k) at all {len(rows)} positions, largest "
          f"difference {gap(shifted, table[[p + k for p in rows]])}")
identity = torch.eye(64)
print("each M_k is a rotation (M_k^T M_k = I):",
      all(torch.allclose(shift_matrix(k, 64).T @ shift_matrix(k, 64), identity, atol=1e-5)
          for k in (1, 7, 50, -20)))
print("M_3 M_4 == M_7:", torch.allclose(shift_matrix(3, 64) @ shift_matrix(4, 64),
                                        shift_matrix(7, 64), atol=1e-5))

# %% [markdown]
# One matrix per offset, valid at every position: $W_Q$ and $W_K$ are linear maps too, so a
# layer *can* build queries and keys that compare "the word $k$ places back". Whether a
# trained model uses this is an empirical question, which the paper does not test directly;
# section 7 gives the comparison it did make, sinusoids against learned positions. (An odd $d_{model}$ has no such map: its last sine has no cosine to rotate with.)

# %% [markdown]
# ## 6. Into the model: embeddings, scaled, plus positions, then dropout
#
# The full model's input layer, as the paper describes it (sections 3.4 and 5.4): look up each
# token's embedding, **multiply it by $\sqrt{d_{model}}$**, add $PE(pos)$, and apply dropout
# ($P_{drop} = 0.1$ in the base model) to the sum:
#
# $$
# x_{pos} = \operatorname{Dropout}\!\left(\sqrt{d_{model}}\; E[\text{token}_{pos}] + PE(pos)\right).
# $$
#
# The paper does not say why it scales, nor how it initialises the embeddings, and what the
# scale does depends on the initialisation. So look at the course's own model:
# `course.transformer.Transformer` (lesson 08) initialises every matrix, the embedding tables
# included, with Xavier (Glorot) uniform, as the Annotated Transformer does. For a
# $(V, d_{model})$ table, $V$ the vocabulary size, the entries have variance
# $2 / (V + d_{model})$, so a row has length about $\sqrt{2 d_{model} / (V + d_{model})}$,
# and after the scale
#
# $$
# \lVert \sqrt{d_{model}}\, E[\text{token}] \rVert \approx d_{model} \sqrt{\frac{2}{V + d_{model}}},
# \qquad
# \lVert PE(pos) \rVert = \sqrt{d_{model} / 2}
# $$
#
# (every position row has the same length: each pair of its entries is a point on the unit
# circle). Their ratio is $2 \sqrt{d_{model} / (V + d_{model})}$: the vocabulary decides
# which is larger. The lengths, measured on the course's `Transformer` at three sizes (one
# layer each, which does not change the embeddings' initialisation); the first two sizes are
# read from the course's own settings (`course.train.CONFIGS`, `course.data`):

# %%
from course.data import FULL_VOCAB_SIZE, load_task
from course.positional import PositionalEncoding, TokenEmbedding
from course.train import CONFIGS
from course.transformer import Transformer

toy_vocab = len(load_task("toy-translation").tgt_vocab)            # lesson 09's target side
sizes = {"lesson 09's task": (toy_vocab, CONFIGS["toy-translation"]["d_model"]),
         "lesson 11, full set": (FULL_VOCAB_SIZE, CONFIGS["fra-eng-full"]["d_model"]),
         "the paper's base": (37000, 512)}                          # (V, d_model)
print(f"{'':<20} {'V':>6} {'d_model':>7} {'token row':>9} {'x sqrt(d_model)':>15} "
      f"{'PE row':>6} {'token / PE':>10} {'PE / token':>10}")
scaled_vs_pe, formula_error = {}, []
for name, (V, d) in sizes.items():
    seed_everything(0)
    model = Transformer(V, V, d_model=d, n_heads=8, n_layers=1, d_ff=4 * d,
                        tie_embeddings=True)                        # Xavier uniform, as always
    table_rows = model.src_embed.embedding.weight.detach()          # (V, d)
    length = table_rows.pow(2).sum(dim=-1).mean().sqrt().item()     # root mean square length
    pe_length = sinusoidal_encoding(1, d).norm().item()            # the same for every pos
    scaled_vs_pe[name] = (length * math.sqrt(d), pe_length)
    formula_error.append(abs(length * math.sqrt(d) / (d * math.sqrt(2 / (V + d))) - 1))
    print(f"{name:<20} {V:>6,} {d:>7} {length:>9.2f} {length * math.sqrt(d):>15.1f} "
          f"{pe_length:>6.1f} {length * math.sqrt(d) / pe_length:>10.2f} "
          f"{pe_length / (length * math.sqrt(d)):>10.2f}")
default_rows = nn.Embedding(37000, 512).weight.detach()            # PyTorch's N(0, 1)
default_length = default_rows.pow(2).sum(dim=-1).mean().sqrt().item()
print(f"{'nn.Embedding N(0, 1)':<20} {37000:>6,} {512:>7} {default_length:>9.1f} "
      f"{default_length * math.sqrt(512):>15.1f} {16.0:>6.1f} "
      f"{default_length * math.sqrt(512) / 16:>10.1f} {16 / (default_length * math.sqrt(512)):>10.2f}")

# %% [markdown]
# At the paper's size the model starts with positions {{ paper_pe / paper_token:.1f }} times
# the length of the scaled tokens (lesson 11's full model, $d_{model} = {{ full_d_model }}$:
# {{ full_pe / full_token:.1f }} times), and without the scale the tokens would be
# {{ 100 * paper_token / math.sqrt(512) / paper_pe:.1f }}% of the length of the positions:
# the scale does not make the two equal, it keeps the tokens from vanishing next to the
# positions. (With a tied table the same entries also serve the output layer, where small is
# what a linear layer wants.) A small
# vocabulary, like lesson 09's target vocabulary of {{ toy_vocab }} tokens (its words and
# three specials), starts the other way round, tokens ahead of positions. PyTorch's own
# `nn.Embedding` default, $\mathcal{N}(0, 1)$ entries, would start with tokens
# $d_{model} = 512$ long: positions a small addition. The numbers, checked:

# %%
paper_token, paper_pe = scaled_vs_pe["the paper's base"]
full_token, full_pe = scaled_vs_pe["lesson 11, full set"]
full_d_model = sizes["lesson 11, full set"][1]
print("Xavier row lengths follow d_model * sqrt(2 / (V + d_model)) within 5%:",
      max(formula_error) < 0.05)                                  # 37 rows: a small sample
print("the paper's size: the scaled token row is 20-30% of the position row:",
      0.2 < paper_token / paper_pe < 0.3)
print("lesson 11's full model: the position row is 2.5 to 4 times the scaled token row:",
      2.5 < full_pe / full_token < 4)
print("the paper's size, unscaled: the token row is under 2% of the position row:",
      paper_token / math.sqrt(512) / paper_pe < 0.02)
print("lesson 09's size: the scaled token row is longer than the position row:",
      scaled_vs_pe["lesson 09's task"][0] > scaled_vs_pe["lesson 09's task"][1])
print("every PE row has length sqrt(d_model / 2):",
      all(torch.allclose(sinusoidal_encoding(1000, d).norm(dim=-1), torch.tensor((d / 2) ** 0.5))
          for d in (64, 256, 512)))

# %% [markdown]
# The course's two modules do exactly this: `TokenEmbedding(vocab_size, d_model)` (its table
# is `.embedding`, an `nn.Embedding`, so lesson 08 can tie it to the output layer) and
# `PositionalEncoding(d_model, max_len=5000, dropout=0.0)`, which computes the table once and
# keeps it in a buffer named `pe`. Dropout acts in training mode only.

# %%
seed_everything(0)
token_embedding = TokenEmbedding(vocab_size=100, d_model=64)
add_positions = PositionalEncoding(d_model=64, max_len=50, dropout=0.1)
tokens = torch.randint(0, 100, (4, 50))              # (B=4, T=50)
x = token_embedding(tokens)                          # (4, 50) -> (4, 50, 64), scaled by 8
add_positions.train()
dropped = add_positions(x)                           # (4, 50, 64)
print(f"training: {(dropped == 0).float().mean():.0%} of the entries dropped, the rest "
      f"scaled by 1/(1 - 0.1); shape {tuple(dropped.shape)}")
add_positions.eval()
print("eval: x + PE exactly:", torch.equal(add_positions(x), x + sinusoidal_encoding(50, 64)))

# %% [markdown]
# The table holds `max_len` positions; a longer sequence is an error, with both numbers:

# %%
try:
    add_positions(token_embedding(torch.randint(0, 100, (1, 60))))   # T = 60 > max_len = 50
except ValueError as error:
    print("ValueError:", error)

# %% [markdown]
# Back to section 1's sentences, now with positions added (no dropout: evaluation mode). The
# same word at two places is now two different inputs, and attention's output is no longer a
# mere reshuffle:

# %%
positions_8 = PositionalEncoding(d_model, max_len=16).eval()       # d_model = 8, as in section 1
with torch.no_grad():
    out_a = self_attend(positions_8(embed(tokens_of("dog bites man"))))   # (3, 8)
    out_b = self_attend(positions_8(embed(tokens_of("man bites dog"))))   # (3, 8)
print("'dog' gets the same vector in both sentences:", torch.allclose(out_a[0], out_b[2]))
print("out(man bites dog) == out(dog bites man) reversed:", torch.allclose(out_b, out_a[reverse]))
print(f"largest difference: {(out_b - out_a[reverse]).abs().max().item():.1f}")

# %% [markdown]
# ## 7. Learned positions instead
#
# The other common choice learns the positions: one trainable vector per position, an
# `nn.Embedding(max_len, d_model)` looked up at `torch.arange(T)`, trained with the rest of
# the model. BERT (Devlin et al., 2019) and GPT (Radford et al., 2018) do this, both with 512
# positions. The Transformer paper tried it too (Table 3, row E) and found "nearly identical
# results" to the sinusoids (BLEU 25.7 against 25.8 on its development set); it kept the
# sinusoids because they *may* let the model extrapolate to sequences longer than those seen
# in training.
#
# What happens past the training length? For a learned table there are two cases. A table with
# exactly as many rows as the longest training sequence has **no row** for a later position:

# %%
learned = nn.Embedding(16, 64)                       # trained on sequences of up to 16 positions
try:
    learned(torch.arange(20))                        # positions 0 .. 19
except IndexError as error:
    print("IndexError:", error)

# %% [markdown]
# A table with more rows than the training sequences were long has rows for those positions,
# but they are **never trained**: a row gets a gradient only when its position occurs. Give a
# table 64 rows, train it (with a toy loss) on sequences of 16 positions, and compare each row
# with where it started:

# %%
seed_everything(0)
learned = nn.Embedding(64, 8)                        # room for 64 positions
start = learned.weight.detach().clone()              # (64, 8)
target = torch.randn(16, 8)                          # a toy objective for positions 0 .. 15
optimizer = torch.optim.Adam(learned.parameters(), lr=0.05)
for _ in range(100):
    loss = (learned(torch.arange(16)) - target).pow(2).mean()    # sequences of 16 positions
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
moved = (learned.weight.detach() - start).abs().sum(dim=-1)      # (64,): how far each row moved
print("rows 0-15 (seen in training) all moved:", bool((moved[:16] > 0).all()))
print("rows 16-63 (never seen) moved at all:", bool((moved[16:] > 0).any()))

# %% [markdown]
# Rows 16 to 63 are still their random initial values: at position 40 the model would add
# noise it never learned to read. The sinusoidal table, by contrast, *has* a value at every
# position, computed by the same formula, with the same geometry: the same length and the
# same dot products with its neighbours at position 50,000 as at position 5.

# %%
far = sinusoidal_encoding(50_010, 64).double()       # (50010, 64)
for p in (5, 50_000):
    print(f"p = {p:>6}: |PE(p)| = {far[p].norm():.3f}, PE(p)·PE(p+1) = {far[p] @ far[p + 1]:.3f}, "
          f"PE(p)·PE(p+9) = {far[p] @ far[p + 9]:.3f}")

# %% [markdown]
# A value is not the same as understanding it, though. The layers after the encoding were
# trained only on the positions they saw, and nothing guarantees they handle new ones well.
# Later measurements found that Transformers with sinusoidal positions degrade quickly on
# sequences much longer than their training ones (Press et al., 2022, "Train Short, Test
# Long"). The sinusoids make extrapolation *possible*; they do not make it happen.

# %% [markdown]
# ## 8. Where it leads: rotary position embeddings
#
# Adding $PE$ to $x$ mixes position and content in one vector, and a query-key score
# $(x_m + PE(m))W_Q \cdot (x_n + PE(n))W_K$ then depends on $m$ and $n$ separately: through
# the cross terms between content and position, and, once $W_Q$ and $W_K$ act, through the
# position-position term $PE(m)\,W_Q W_K^\top PE(n)^\top$ too (without them that term is
# $PE(m) \cdot PE(n)$, which depends on $m - n$ alone, section 4). Rotary position embeddings
# (RoFormer, Su et al., 2021) add nothing to $x$. Inside attention, they **rotate** each
# pair $(2i, 2i+1)$ of every
# query and key by the angle $pos \cdot \theta_i$, $\theta_i = 10000^{-2i/d}$ (the sinusoidal
# frequencies again):
#
# $$
# \begin{pmatrix} q'_{2i} \\ q'_{2i+1} \end{pmatrix} =
# \begin{pmatrix} \cos m\theta_i & -\sin m\theta_i \\ \sin m\theta_i & \cos m\theta_i \end{pmatrix}
# \begin{pmatrix} q_{2i} \\ q_{2i+1} \end{pmatrix}
# \quad \text{for a query at position } m, \text{ and the same for a key at } n .
# $$
#
# A rotation by $\alpha$ followed by the dot product with a vector rotated by $\beta$ is the
# dot product after rotating by $\alpha - \beta$ alone ($R_\alpha^\top R_\beta = R_{\beta -
# \alpha}$), so each pair's share of $q'_m \cdot k'_n$ depends on $(m - n)\,\theta_i$: **the
# score depends only on the offset** $m - n$, never on where the two positions $m$ and $n$
# sit in the sequence. Rotations also keep lengths, and position 0 is not rotated at all.
# `course.positional.apply_rotary(x, base=10000.0, positions=None)` rotates $x$ $(\dots, T,
# d)$; `positions` gives each row's position (default $0, \dots, T-1$).

# %%
from course.positional import apply_rotary

seed_everything(0)
d_head, T = 16, 32
q, k = torch.randn(2, d_head, dtype=torch.float64)  # one query vector, one key vector
q_at = apply_rotary(q.expand(T, d_head))             # (T, d_head): q placed at m = 0 .. T-1
k_at = apply_rotary(k.expand(T, d_head))             # (T, d_head): k placed at n = 0 .. T-1
rotary_scores = q_at @ k_at.T                        # (T, T): entry (m, n) = q'_m · k'_n
pe_head = sinusoidal_encoding(T, d_head).double()    # (T, d_head)
added_scores = (q + pe_head) @ (k + pe_head).T       # (T, T): positions added instead

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
for ax, scores, title in [(axes[0], added_scores, "added: (q + PE(m)) · (k + PE(n))"),
                          (axes[1], rotary_scores, "rotary: q rotated by m · k rotated by n")]:
    image = ax.imshow(scores, cmap="viridis")
    ax.set_xlabel("key position n")
    ax.set_ylabel("query position m")
    ax.set_title(title, fontsize=10)
    colorbar = fig.colorbar(image, ax=ax)
    colorbar.set_label("score q · k")
fig.suptitle("The same query and key vectors at every pair of positions")
plt.tight_layout()
plt.show()

# %% [markdown]
# On the right every diagonal (one offset $m - n$) has a single colour; on the left it does
# not. Measured: the largest spread of the scores along any one diagonal.

# %%
def spread_along_diagonals(scores):
    """The largest max - min over the entries that share one offset m - n."""
    return max((scores.diagonal(offset).max() - scores.diagonal(offset).min()).item()
               for offset in range(-(T - 1), T))


print(f"added positions: scores at one offset spread over {spread_along_diagonals(added_scores):.1f}")
print("rotary: scores at one offset all equal:", spread_along_diagonals(rotary_scores) < 1e-10)
x = torch.randn(2, 4, T, d_head)                     # (B, h, T, d_head): a batch of heads
rotated = apply_rotary(x)                            # (B, h, T, d_head)
print("rotary keeps every vector's length:",
      torch.allclose(rotated.norm(dim=-1), x.norm(dim=-1), atol=1e-5))
print("position 0 unchanged:", torch.equal(rotated[..., 0, :], x[..., 0, :]))

# %% [markdown]
# In a model, rotary is applied to $q$ and $k$ of every head in every self-attention layer,
# after $W_Q$ and $W_K$ (not to $v$, and nothing is added to the embeddings). In
# cross-attention the queries and keys come from two different sequences, so the offset
# between a query's position and a key's means nothing: the course's `Transformer` leaves
# them unrotated. GPT-NeoX and LLaMA, among other recent language models, use rotary
# positions. The
# course's encoder-decoder `Transformer`
# (lessons 08-11) uses the paper's sinusoids by default; it also takes `positions="rotary"`
# (the SCAN length runs in `docs/training.md` compare the two, and lesson 10's KV cache handles both).
# Lesson 12's decoder-only language model uses rotary positions throughout, through this
# `apply_rotary`.
#
# ## What's next
#
# Attention now knows where each word is. Lesson 06 controls *which* words it may look at:
# padding masks for batches of sentences of different lengths, and the causal mask that keeps
# a decoder from reading the future.
