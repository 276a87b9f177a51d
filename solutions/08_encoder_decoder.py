# %% [markdown]
# # 08 · The full Transformer: encoder and decoder
#
# **The idea.** Lessons 02 to 07 built every part of the Transformer's encoder: attention,
# heads, positions, masks, Add & Norm, the feed-forward network. The paper's model is a
# translator, though: an **encoder** reads the source sentence, a **decoder** writes the
# target sentence, one word after the other. The decoder layer needs one new sublayer,
# **cross-attention**, through which every target position reads the encoder's output.
#
# In this lesson you will
# 1. pin down where each of the Transformer's three attentions takes its queries, keys and
#    values, and see cross-attention as lesson 01's encoder-decoder attention without the
#    bottleneck;
# 2. draw the data flow of the whole model with the shape of every tensor;
# 3. write `DecoderLayer` (post-LN and pre-LN) and check that it computes what
#    `torch.nn.TransformerDecoderLayer` computes, given the same weights;
# 4. see how *teacher forcing* lets one forward pass serve every position at once (the
#    target shifted right), and check that it equals decoding one step at a time (lesson 09
#    does the training);
# 5. assemble the full model yourself, `EncoderDecoder`, equal to the course's
#    `course.transformer.Transformer`;
# 6. build BERT-, GPT- and T5-style models from the same layers in a few lines each;
# 7. watch an ambiguous word's vector become more context-dependent layer by layer;
# 8. rebuild the paper's base and big models and count their parameters against the
#    paper's 65 and 213 million.

# %%
import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from matplotlib.colors import ListedColormap
from matplotlib.patches import FancyBboxPatch
from torch import nn

from course import check
from course.layers import EncoderLayer
from course.masking import causal_mask, decoder_mask, padding_mask
from course.multihead import MultiHeadAttention
from course.positional import PositionalEncoding, TokenEmbedding
from course.utils import seed_everything

seed_everything(0)
torch.set_printoptions(precision=3, sci_mode=False)

# %% [markdown]
# ## 1. Three attentions, three sources of queries, keys and values
#
# Every attention in the model is lesson 04's `MultiHeadAttention(query, key, value, mask)`.
# What differs is *which tensors* go in. Call the encoder's stream $x$ (one vector per
# source position), the decoder's stream $y$ (one per target position), and the encoder's
# final output the **memory** $m$:
#
# | attention | where | queries | keys | values | mask | weights |
# |---|---|---|---|---|---|---|
# | self-attention | encoder | $x$ | $x$ | $x$ | source padding | $(B, h, T_{src}, T_{src})$ |
# | masked self-attention | decoder | $y$ | $y$ | $y$ | causal & target padding | $(B, h, T_{tgt}, T_{tgt})$ |
# | cross-attention | decoder | $y$ | $m$ | $m$ | source padding | $(B, h, T_{tgt}, T_{src})$ |
#
# The middle row is often stated wrongly, as if the decoder's first attention already read
# the encoder. It does not: its queries, keys **and values all come from the decoder**; it
# is self-attention over the target written so far, with the causal mask of lesson 06. The
# source enters the decoder in one place only, the cross-attention, where the decoder asks
# (queries) and the memory answers (keys and values). The paper (§3.2.3): "the queries come
# from the previous decoder layer, and the memory keys and values come from the output of
# the encoder."
#
# The three weight shapes say it too. Run each attention once on a batch with a source of 7
# positions and a target of 5:

# %%
d_model, n_heads, d_ff = 16, 4, 32
B, T_src, T_tgt = 2, 7, 5
x = torch.randn(B, T_src, d_model)                             # the encoder's stream
y = torch.randn(B, T_tgt, d_model)                             # the decoder's stream
memory = torch.randn(B, T_src, d_model)                        # the encoder's output
attentions = {name: MultiHeadAttention(d_model, n_heads)
              for name in ("encoder self", "decoder masked self", "cross")}
with torch.no_grad():
    attentions["encoder self"](x, x, x)                        # q, k, v: the encoder
    attentions["decoder masked self"](y, y, y, causal_mask(T_tgt))  # q, k, v: the decoder
    out = attentions["cross"](y, memory, memory)               # q: decoder; k, v: memory
for name, attention in attentions.items():
    print(f"{name + ' attention':>30}: weights {tuple(attention.attn.shape)}")
print(f"{'cross-attention output':>30}: {tuple(out.shape)}, one vector per *target* position")

# %% [markdown]
# ### Cross-attention is lesson 01's attention, without the bottleneck
#
# Lesson 01 ended with an RNN encoder-decoder that, at every output step, looked back at all
# the encoder's states (Bahdanau et al., 2015): the decoder's state was the query, the
# encoder's states were the keys and the values. Cross-attention is the same lookup, with
# lesson 02's dot-product score and lesson 04's heads:
#
# | | RNN with attention (lesson 01) | Transformer cross-attention |
# |---|---|---|
# | query | the decoder's state at step $i$ | the decoder's vector at position $i$ |
# | keys, values | the encoder's states $h_1 \dots h_{T_{src}}$ | the memory $m_1 \dots m_{T_{src}}$ |
# | score | $v_a^\top \tanh(W_a q_i + U_a k_j)$ | $q_i \cdot k_j / \sqrt{d_k}$, per head |
# | how a source position got its vector | a left-to-right recurrence, $T_{src}$ steps | $N$ layers of self-attention, all positions at once |
#
# Lesson 01's plain encoder-decoder handed the decoder **one** context vector, the same 64
# numbers for a string of 3 digits or of 16 (lesson 01, section 6), and it would be the same
# 64 for a sentence of 50 words: the bottleneck. Cross-attention hands every
# decoder position the whole memory, $T_{src} \times d_{model}$ numbers, which grows with
# the sentence, and each target position chooses its own weighting of all source positions:

# %%
cross = MultiHeadAttention(d_model, n_heads)
for T_source in (5, 50, 500):
    memory = torch.randn(1, T_source, d_model)                 # (1, T_src, d_model)
    with torch.no_grad():
        cross(torch.randn(1, T_tgt, d_model), memory, memory)  # weights (1, h, T_tgt, T_src)
    sums = cross.attn.sum(dim=-1)                              # (1, h, T_tgt): over the source
    print(f"T_src = {T_source:>3}: the decoder reads {memory.numel():>5} numbers; each of the "
          f"{T_tgt} x {n_heads} query rows spreads weight 1 over all {T_source} source "
          f"positions: {torch.allclose(sums, torch.ones_like(sums))}")

# %% [markdown]
# ## 2. The decoder layer
#
# A decoder layer is three sublayers, each wrapped in Add & Norm exactly as in lesson 07's
# encoder layer, with dropout on each sublayer's output. In the paper's **post-LN**
# arrangement, with $y$ the layer's input and $m$ the memory:
#
# $$
# \begin{aligned}
# a &= \operatorname{LN}_1\big(y + \operatorname{Dropout}(\operatorname{SelfAttn}(y, y, y;\ \text{tgt\_mask}))\big) \\
# c &= \operatorname{LN}_2\big(a + \operatorname{Dropout}(\operatorname{CrossAttn}(a, m, m;\ \text{memory\_mask}))\big) \\
# \text{out} &= \operatorname{LN}_3\big(c + \operatorname{Dropout}(\operatorname{FFN}(c))\big)
# \end{aligned}
# $$
#
# and in **pre-LN**, each sublayer reads the *normalised* stream and adds to the stream
# itself, $y \leftarrow y + \operatorname{Dropout}(\operatorname{Sublayer}(\operatorname{LN}(y)))$.
# One detail: pre-LN normalises the decoder's stream, not the memory. The memory goes into
# the cross-attention as it comes, and it comes normalised already, because a pre-LN encoder
# ends with one final LayerNorm (lesson 07). `torch.nn.TransformerDecoderLayer` does the
# same, and so does ours.
#
# The order matters: first the decoder looks at what it has written (masked self-attention),
# then at the source (cross-attention), then it transforms each position on its own (the
# feed-forward network). The whole model, with the shape of every tensor on its arrows and,
# in red, the residual stream of lesson 07: each sublayer's input goes around it to its
# Add & Norm (drawn in code: the boxes are matplotlib patches):

# %%
def box(ax, x, y, text, colour, height=0.04, width=0.34):
    """A rounded box centred at (x, y) with `text` in it."""
    ax.add_patch(FancyBboxPatch((x - width / 2, y - height / 2), width, height,
                                boxstyle="round,pad=0.005", facecolor=colour, edgecolor="black"))
    ax.text(x, y, text, ha="center", va="center", fontsize=10)


def arrow(ax, start, end, label=None, colour="black", label_side=+1):
    """An arrow from `start` to `end`, with the tensor's shape written beside it (right of it,
    or left for label_side=-1)."""
    ax.annotate("", xy=end, xytext=start, arrowprops=dict(arrowstyle="->", lw=1.2, color=colour))
    if label:
        ax.text((start[0] + end[0]) / 2 + label_side * 0.01, (start[1] + end[1]) / 2, label,
                fontsize=9, color="darkblue", va="center",
                ha="left" if label_side > 0 else "right")


def residual(ax, x, branch_y, add_y, side, width=0.34):
    """The residual path: from the stream below a sublayer, around it, into its Add & Norm."""
    edge = x + side * width / 2                                   # the Add & Norm box's side
    outside = edge + side * 0.035
    ax.plot([x, outside, outside], [branch_y, branch_y, add_y], color="firebrick", lw=1.4)
    ax.plot([x], [branch_y], "o", color="firebrick", markersize=4)
    arrow(ax, (outside, add_y), (edge + side * 0.008, add_y), colour="firebrick")


attn_colour, ff_colour, norm_colour, io_colour = "#f6d7a7", "#c8e6c9", "#e1e1f5", "#eeeeee"
embedding = "TokenEmbedding (x $\\sqrt{d_{model}}$)\n+ positions, dropout"
encoder_boxes = [  # (height on the page, text, colour, shape of the arrow leaving it)
    (0.04, "source tokens", io_colour, "(B, T_src)"),
    (0.13, embedding, io_colour, "(B, T_src, d_model)"),
    (0.25, "self-attention: q = k = v = x\nmask: source padding\n"
           "weights (B, h, T_src, T_src)", attn_colour, "(B, T_src, d_model)"),
    (0.34, "Add & Norm", norm_colour, "(B, T_src, d_model)"),
    (0.45, "feed-forward (each position alone)", ff_colour, "(B, T_src, d_model)"),
    (0.54, "Add & Norm", norm_colour, "(B, T_src, d_model)"),
    (0.66, "memory (B, T_src, d_model): the keys\nand values of every cross-attention",
     io_colour, None),
]
decoder_boxes = [
    (0.04, "target tokens, shifted right:\n<bos> y1 y2 ...", io_colour, "(B, T_tgt)"),
    (0.13, embedding, io_colour, "(B, T_tgt, d_model)"),
    (0.25, "masked self-attention: q = k = v = y\nmask: causal & target padding\n"
           "weights (B, h, T_tgt, T_tgt)", attn_colour, "(B, T_tgt, d_model)"),
    (0.34, "Add & Norm", norm_colour, "(B, T_tgt, d_model)"),
    (0.45, "cross-attention: q = y, k = v = memory\nmask: source padding\n"
           "weights (B, h, T_tgt, T_src)", attn_colour, "(B, T_tgt, d_model)"),
    (0.54, "Add & Norm", norm_colour, "(B, T_tgt, d_model)"),
    (0.64, "feed-forward (each position alone)", ff_colour, "(B, T_tgt, d_model)"),
    (0.73, "Add & Norm", norm_colour, "(B, T_tgt, d_model)"),
    (0.84, "Linear d_model -> tgt_vocab", io_colour, "(B, T_tgt, tgt_vocab)"),
    (0.94, "logits; their softmax:\nnext-token probabilities", io_colour, None),
]
fig, ax = plt.subplots(figsize=(12, 12))
for boxes, x_pos, side in ((encoder_boxes, 0.27, -1), (decoder_boxes, 0.71, +1)):  # side: red
    heights = [0.065 if colour == attn_colour else 0.045 for _, _, colour, _ in boxes]
    for i, ((y_pos, text, colour, shape), height) in enumerate(zip(boxes, heights, strict=True)):
        box(ax, x_pos, y_pos, text, colour, height)
        if shape:
            top = y_pos + height / 2 + 0.005
            bottom = boxes[i + 1][0] - heights[i + 1] / 2 - 0.005
            arrow(ax, (x_pos, top), (x_pos, bottom), shape, label_side=-side)  # not on the red
        if i + 1 < len(boxes) and boxes[i + 1][1] == "Add & Norm":   # box i is a sublayer
            branch_y = y_pos - height / 2 - 0.02                     # on the arrow into it
            residual(ax, x_pos, branch_y, boxes[i + 1][0], side)
arrow(ax, (0.44, 0.66), (0.535, 0.47))                              # memory -> cross-attention
for (low, high), (left, right), label_x, label in (
        ((0.194, 0.575), (0.045, 0.465), 0.025, "N x encoder layer"),
        ((0.194, 0.765), (0.505, 0.935), 0.96, "N x decoder layer")):
    ax.add_patch(FancyBboxPatch((left, low), right - left, high - low,
                                boxstyle="round,pad=0", fill=False, linestyle="--",
                                edgecolor="0.4"))
    ax.text(label_x, (low + high) / 2, label, rotation=90, ha="center", va="center",
            fontsize=11)
ax.set_xlim(0, 1.0)
ax.set_ylim(0, 0.99)
ax.set_xticks([])
ax.set_yticks([])
ax.set_xlabel("encoder (left), decoder (right); post-LN: Add & Norm = LayerNorm(x + sublayer(x)),\n"
              "x reaching the Add on the red residual path around each sublayer (lesson 07)",
              fontsize=11)
ax.set_ylabel("data flows upwards", fontsize=11)
ax.set_title("The encoder-decoder Transformer, every tensor's shape on its arrow", fontsize=13)
plt.show()

# %% [markdown]
# ## 3. Exercise: `DecoderLayer`
#
# Write the layer. The contract (the course's `Transformer` and lesson 09 build on it):
#
# - `__init__(d_model, n_heads, d_ff, dropout=0.1, norm_first=False)`:
#   - `self.self_attn`, `self.cross_attn`: two separate `MultiHeadAttention(d_model, n_heads,
#     dropout)` (lesson 04's, which drops attention weights while training);
#   - `self.ff = FeedForward(d_model, d_ff, dropout)` (lesson 07's);
#   - `self.norm1`, `self.norm2`, `self.norm3`: three separate `LayerNorm(d_model)`, for the
#     self-attention, the cross-attention and the feed-forward, in that order;
#   - dropout on each sublayer's output: `self.dropout1`, `self.dropout2`, `self.dropout3`;
# - `forward(x, memory, tgt_mask=None, memory_mask=None)`: `x` is the decoder's input
#   $(B, T_{tgt}, d_{model})$, `memory` the encoder's output $(B, T_{src}, d_{model})$. Masks
#   are boolean, True = may attend: `tgt_mask` broadcastable to $(B, h, T_{tgt}, T_{tgt})$
#   goes to the self-attention, `memory_mask` broadcastable to $(B, h, T_{tgt}, T_{src})$
#   to the cross-attention; pass them on unchanged. Return $(B, T_{tgt}, d_{model})$:
#   post-LN when `norm_first` is False, pre-LN when True.
#
# Lesson 07's `EncoderLayer` is two thirds of the answer.

# %%
from course.layers import FeedForward, LayerNorm  # noqa: F401 (for your answer)


class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        ### BEGIN SOLUTION
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.norm3 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)
        ### END SOLUTION

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        ### BEGIN SOLUTION
        if self.norm_first:
            h = self.norm1(x)                                             # (B, T_tgt, d_model)
            x = x + self.dropout1(self.self_attn(h, h, h, tgt_mask))
            h = self.norm2(x)                                             # memory: as it comes
            x = x + self.dropout2(self.cross_attn(h, memory, memory, memory_mask))
            return x + self.dropout3(self.ff(self.norm3(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)))
        x = self.norm2(x + self.dropout2(self.cross_attn(x, memory, memory, memory_mask)))
        return self.norm3(x + self.dropout3(self.ff(x)))                  # (B, T_tgt, d_model)
        ### END SOLUTION


# %% [markdown]
# The checker copies known weights into your `self_attn`, `cross_attn`, `ff` and three norms,
# and compares your layer with the reference in both arrangements: source and target of
# the same and of different lengths, with and without masks, values and gradients (with
# respect to `memory` too: the encoder learns only through it). Then it checks that dropout
# acts only while training, in the right places, at the rate asked.

# %%
dec_ok = check.DecoderLayer(DecoderLayer)

# %% [markdown]
# ### The same as `torch.nn.TransformerDecoderLayer`
#
# Given the same weights, ours must compute what PyTorch's layer computes, in both
# arrangements, on a padded batch. torch calls the cross-attention `multihead_attn` and
# keeps `linear1`, `linear2` on the layer; `course.layers.load_decoder_layer` copies them
# into our names. Its masks mean the opposite of ours and come in three arguments: a causal
# `tgt_mask` and two key-padding masks; lesson 06's converters translate. We use your class
# if it passed the checker, else the course's.

# %%
from course import layers as reference
from course.layers import load_decoder_layer
from course.masking import to_torch_attn_mask, to_torch_key_padding_mask

Layer = DecoderLayer if dec_ok else reference.DecoderLayer
print("using", "your DecoderLayer" if dec_ok else "the reference course.layers.DecoderLayer")
seed_everything(0)
tgt = torch.tensor([[5, 3, 8, 2, 7], [4, 9, 1, 0, 0]])                # (B=2, T_tgt=5), pad 0
src = torch.tensor([[6, 2, 9, 4, 4, 1, 3], [7, 5, 2, 8, 0, 0, 0]])    # (B=2, T_src=7)
ours_masks = dict(tgt_mask=decoder_mask(tgt, 0),                      # (B, 1, T_tgt, T_tgt)
                  memory_mask=padding_mask(src, 0))                   # (B, 1, 1, T_src)
torch_masks = dict(tgt_mask=to_torch_attn_mask(causal_mask(5)),       # True = masked out
                   tgt_key_padding_mask=to_torch_key_padding_mask(padding_mask(tgt, 0)),
                   memory_key_padding_mask=to_torch_key_padding_mask(padding_mask(src, 0)))
y, memory = torch.randn(2, 5, d_model), torch.randn(2, 7, d_model)
for norm_first in (False, True):
    theirs = nn.TransformerDecoderLayer(d_model, n_heads, d_ff, dropout=0.0, batch_first=True,
                                        norm_first=norm_first)
    with torch.no_grad():
        for p in theirs.parameters():                   # torch starts biases at 0 and norms
            p.add_(0.3 * torch.randn_like(p))           # at 1: make every number count
    ours = load_decoder_layer(Layer(d_model, n_heads, d_ff, 0.0, norm_first), theirs)
    inputs_ours = [t.clone().requires_grad_() for t in (y, memory)]
    inputs_theirs = [t.clone().requires_grad_() for t in (y, memory)]
    got = ours.train()(*inputs_ours, **ours_masks)
    want = theirs.train()(*inputs_theirs, **torch_masks)
    got.sum().backward()
    want.sum().backward()
    grads_equal = all(torch.allclose(a.grad, b.grad, atol=1e-5)
                      for a, b in zip(inputs_ours, inputs_theirs))
    print(f"norm_first={norm_first!s:>5}: outputs equal {torch.allclose(got, want, atol=1e-5)}, "
          f"gradients of y and memory equal {grads_equal}")

# %% [markdown]
# Equal to float32 rounding, values and gradients. (The course's tests compare the
# gradient of every parameter too, in float32 and float64.)

# %% [markdown]
# ## 4. Teacher forcing: the target shifted right
#
# The decoder predicts the next token from the ones before it. To train it on a pair
# (source, target), we do not let it generate: we hand it the **true** target, shifted one
# position to the right behind a `<bos>` (beginning of sentence) token, and ask it to
# predict, at every position, the token that comes next, ending with `<eos>`:
#
# | position $t$ | 0 | 1 | 2 | 3 | 4 |
# |---|---|---|---|---|---|
# | decoder input | `<bos>` | the | cat | sat | down |
# | target (what position $t$ must predict) | the | cat | sat | down | `<eos>` |
#
# Position $t$ may use the input tokens $0 \dots t$ and must predict target token $t$.
# Without a mask it could simply read its answer at input position $t + 1$ (lesson 06
# showed a model learning exactly that). With the causal mask it sees:

# %%
decoder_input = ["<bos>", "the", "cat", "sat", "down"]
target = ["the", "cat", "sat", "down", "<eos>"]
T = len(decoder_input)
fig, ax = plt.subplots(figsize=(6.2, 4))
image = ax.imshow(causal_mask(T).int(), cmap=ListedColormap(["#dddddd", "#4c72b0"]),
                  vmin=0, vmax=1)
ax.set_xticks(range(T), [f"{t}: {w}" for t, w in enumerate(decoder_input)], rotation=30)
ax.set_yticks(range(T), [f"{t}: predicts '{w}'" for t, w in enumerate(target)])
ax.set_xlabel("decoder input position it may read (key)")
ax.set_ylabel("position (query), and what it must predict")
ax.set_title("Teacher forcing: position t reads inputs 0..t, predicts target t")
colorbar = fig.colorbar(image, ax=ax, ticks=[0, 1], fraction=0.046, pad=0.04)
colorbar.set_ticklabels(["hidden", "visible"])
colorbar.set_label("causal mask")
plt.tight_layout()
plt.show()

# %% [markdown]
# Each row is one training example: "given these words, predict that one". The causal mask
# turns one forward pass over the $T$ positions into $T$ such examples at once, each seeing
# exactly what it would see if we decoded one token at a time. That is why training a
# Transformer decoder is parallel over the target, where lesson 01's RNN decoder needed $T$
# sequential steps.
#
# Let's check the claim on the full model (section 5 introduces it; here it is just a
# function from token ids to logits). One pass over `<bos> the cat sat down` gives 5 rows of
# logits; decoding prefix by prefix, `<bos>`, `<bos> the`, ..., and keeping only the last
# row each time gives the same 5 rows. So does the loss. (One source sentence, without
# padding, so `decode` needs no source mask here; section 5 shows when it does.)

# %%
from course.transformer import Transformer

words = ["<pad>", "<bos>", "<eos>", "the", "cat", "sat", "down", "le", "chat", "s'est", "assis"]
ids = {w: i for i, w in enumerate(words)}
seed_everything(0)
model = Transformer(len(words), len(words), d_model=32, n_heads=4, n_layers=2, d_ff=64,
                    pad_id=ids["<pad>"]).eval()                        # untrained: any weights do
src = torch.tensor([[ids[w] for w in ["le", "chat", "s'est", "assis", "<eos>"]]])  # (1, T_src)
full = torch.tensor([[ids[w] for w in ["<bos>", *target]]])            # (1, T + 1)
tgt_in, tgt_out = full[:, :-1], full[:, 1:]                            # shifted: (1, T) each
with torch.no_grad():
    one_pass = model(src, tgt_in)                                      # (1, T, V): all at once
    memory = model.encode(src)                                         # (1, T_src, d_model)
    steps = torch.stack([model.decode(tgt_in[:, : t + 1], memory)[:, -1]  # last row, (1, V)
                         for t in range(T)], dim=1)                    # (1, T, V)
    loss_one_pass = F.cross_entropy(one_pass.flatten(0, 1), tgt_out.flatten())
    loss_steps = F.cross_entropy(steps.flatten(0, 1), tgt_out.flatten())
print("one pass equals decoding one prefix at a time:", torch.allclose(one_pass, steps, atol=1e-5))
print(f"the loss over all {T} positions, one pass: {loss_one_pass:.3f}, prefix by prefix: "
      f"{loss_steps:.3f}")

# %% [markdown]
# Identical, for $1$ pass instead of $T$. At *inference* time there is no true target to
# feed, so the decoder has to run prefix by prefix, feeding back its own predictions
# (lesson 09's greedy and beam search); the encoder still runs once.

# %% [markdown]
# ## 5. Exercise: assemble the whole model, `EncoderDecoder`
#
# Every part of the drawing in section 2 exists now; what is left is the wiring around the
# two stacks of layers. Read the drawing from the bottom, with $B$ sentence pairs, a source
# of $T_{src}$ tokens and a target of $T_{tgt}$:
#
# 1. **Embeddings, scaled.** Each side looks its token ids up in its own table,
#    `nn.Embedding(vocab, d_model)`: $(B, T) \to (B, T, d_{model})$. The paper multiplies
#    the looked-up vectors by $\sqrt{d_{model}}$ (§3.4); lesson 05 (section 6) measured how
#    this factor sets the balance between a token's vector and its position's.
# 2. **Positions, then dropout.** Add the sinusoidal table's first $T$ rows, `pe[:T]`
#    $(T, d_{model})$, which broadcasts over the batch; then dropout on the *sum*: "we apply
#    dropout to the sums of the embeddings and the positional encodings in both the encoder
#    and decoder stacks" (§5.4). Adding the positions after the dropout would leave them
#    untouched while the words are dropped: a different model.
# 3. **The masks, from `pad_id`.** The source's padding mask, `padding_mask(src, pad_id)`
#    $(B, 1, 1, T_{src})$, goes to every encoder layer *and* to every cross-attention:
#    in both, the keys are source positions. The decoder's self-attention gets causal &
#    target padding, `decoder_mask(tgt, pad_id)` $(B, 1, T_{tgt}, T_{tgt})$. No causal mask
#    in the encoder: it reads the whole source at once.
# 4. **The two stacks.** $N$ encoder layers, each reading the previous one's output; the last
#    output is the memory $(B, T_{src}, d_{model})$. Then $N$ decoder layers, each reading
#    the previous one's output *and the same memory*.
# 5. **The final norms, in pre-LN only.** A pre-LN layer never normalises its residual
#    stream (lesson 07), so a pre-LN stack ends with one `LayerNorm`: `encoder_norm` on the
#    memory, `decoder_norm` before the output layer. A post-LN layer ends with its own Add &
#    Norm already, so the paper's model has none (`None`).
# 6. **The output layer.** `nn.Linear(d_model, tgt_vocab)` turns each target position's
#    vector into one score per word: the logits $(B, T_{tgt}, \text{tgt\_vocab})$. No
#    softmax: the loss takes logits (lesson 09).
# 7. **Tied embeddings, when asked.** `nn.Embedding(V, d_model).weight` and
#    `nn.Linear(d_model, V).weight` are both $(V, d_{model})$: one matrix can do both jobs,
#    a row read for each input token, a dot product with every row for the output scores.
#    With `tie_embeddings=True` (one vocabulary for both languages, as in the paper) the
#    three places hold **one** `nn.Parameter`: assign it, `self.out.weight =
#    self.src_embed.weight`. Copying its values (`.data`, `.copy_()`) would tie nothing:
#    the copies would learn apart.
#
# The contract of `EncoderDecoder(src_vocab, tgt_vocab, d_model=512, n_heads=8, n_layers=6,
# d_ff=2048, dropout=0.1, norm_first=False, max_len=5000, pad_id=0, tie_embeddings=False)`,
# `forward(src, tgt) -> logits`. The names matter: the checker copies known weights into
# them.
#
# | attribute | what it is |
# |---|---|
# | `src_embed`, `tgt_embed` | given: plain `nn.Embedding(vocab, d_model)` tables (the scaling is yours) |
# | `pe` | given: the sinusoidal table $(\text{max\_len}, d_{model})$, a buffer (not learned) |
# | `dropout` | given: one `nn.Dropout(dropout)`, for both sides |
# | `encoder_layers`, `decoder_layers` | `nn.ModuleList`s of `n_layers` of `reference.EncoderLayer` and `reference.DecoderLayer(d_model, n_heads, d_ff, dropout, norm_first)` (`course.layers`), a new layer each time |
# | `encoder_norm`, `decoder_norm` | `LayerNorm(d_model)` (`course.layers.LayerNorm`) when `norm_first`, else `None` |
# | `out` | `nn.Linear(d_model, tgt_vocab)`; when tying, its `weight` *is* `src_embed.weight`, and so is `tgt_embed.weight` |
#
# The layers are the course's, `reference.EncoderLayer` and `reference.DecoderLayer`
# (`from course import layers as reference`, in the cell below), so that this exercise does
# not depend on your `DecoderLayer` above: in this notebook the bare name `DecoderLayer` is
# your class. The cell below also imports `LayerNorm` and the mask builders: after a
# kernel restart it needs only the notebook's first cell run before it. Split the work as
# the skeleton suggests: `embed` for steps 1-2, `encode` and `decode` for the stacks,
# `forward` for the source mask.
#
# The checker judges `forward(src, tgt)`, and also `encode(src, src_mask)` and
# `decode(tgt, memory, src_mask)` as lesson 09 calls them. `decode` is given no target
# mask, so it must build `decoder_mask(tgt, self.pad_id)` itself when none is given:
# building the causal mask only in `forward` is not enough. (A class written without
# `encode` and `decode` is judged on `forward` only.)

# %%
import math  # noqa: F401 (for your answer)

from course import layers as reference
from course.layers import LayerNorm  # noqa: F401, F811 (for your answer, after a restart too)
from course.masking import decoder_mask, padding_mask  # noqa: F401 (for your answer)
from course.positional import sinusoidal_encoding


class EncoderDecoder(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, d_model=512, n_heads=8, n_layers=6, d_ff=2048,
                 dropout=0.1, norm_first=False, max_len=5000, pad_id=0, tie_embeddings=False):
        super().__init__()
        self.d_model, self.pad_id = d_model, pad_id
        self.src_embed = nn.Embedding(src_vocab, d_model)              # (src_vocab, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)              # (tgt_vocab, d_model)
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model), persistent=False)
        self.dropout = nn.Dropout(dropout)
        # the stacks, the final norms (pre-LN only), the output layer, the tying
        ### BEGIN SOLUTION
        layer_args = (d_model, n_heads, d_ff, dropout, norm_first)
        self.encoder_layers = nn.ModuleList(
            [reference.EncoderLayer(*layer_args) for _ in range(n_layers)])
        self.decoder_layers = nn.ModuleList(
            [reference.DecoderLayer(*layer_args) for _ in range(n_layers)])
        self.encoder_norm = LayerNorm(d_model) if norm_first else None
        self.decoder_norm = LayerNorm(d_model) if norm_first else None
        self.out = nn.Linear(d_model, tgt_vocab)                       # weight (tgt_vocab, d_model)
        if tie_embeddings:                                             # one Parameter, three uses
            self.tgt_embed.weight = self.src_embed.weight
            self.out.weight = self.src_embed.weight
        ### END SOLUTION

    def embed(self, table, tokens):
        """tokens (B, T) -> dropout(table(tokens) * sqrt(d_model) + pe[:T]), (B, T, d_model)."""
        ### BEGIN SOLUTION
        x = table(tokens) * math.sqrt(self.d_model)                   # (B, T) -> (B, T, d_model)
        return self.dropout(x + self.pe[: tokens.shape[1]])            # + (T, d_model), then drop
        ### END SOLUTION

    def encode(self, src, src_mask):
        """src (B, T_src), src_mask (B, 1, 1, T_src) -> memory (B, T_src, d_model)."""
        ### BEGIN SOLUTION
        x = self.embed(self.src_embed, src)                            # (B, T_src, d_model)
        for layer in self.encoder_layers:
            x = layer(x, src_mask)                                     # (B, T_src, d_model)
        return x if self.encoder_norm is None else self.encoder_norm(x)
        ### END SOLUTION

    def decode(self, tgt, memory, src_mask):
        """tgt (B, T_tgt), memory (B, T_src, d_model), src_mask -> logits (B, T_tgt, tgt_vocab)."""
        ### BEGIN SOLUTION
        tgt_mask = decoder_mask(tgt, self.pad_id)                      # (B, 1, T_tgt, T_tgt)
        y = self.embed(self.tgt_embed, tgt)                            # (B, T_tgt, d_model)
        for layer in self.decoder_layers:
            y = layer(y, memory, tgt_mask, src_mask)                   # (B, T_tgt, d_model)
        if self.decoder_norm is not None:
            y = self.decoder_norm(y)
        return self.out(y)                                             # (B, T_tgt, tgt_vocab)
        ### END SOLUTION

    def forward(self, src, tgt):
        """src (B, T_src), tgt (B, T_tgt) token ids -> logits (B, T_tgt, tgt_vocab)."""
        ### BEGIN SOLUTION
        src_mask = padding_mask(src, self.pad_id)                      # (B, 1, 1, T_src)
        memory = self.encode(src, src_mask)                            # (B, T_src, d_model)
        return self.decode(tgt, memory, src_mask)                      # (B, T_tgt, tgt_vocab)
        ### END SOLUTION


# %% [markdown]
# The checker builds your class post-LN and pre-LN, tied and untied, copies the course
# model's random weights into it, and compares the logits and the gradient of every
# parameter with `course.transformer.Transformer`'s: on padded sources and targets, with
# `pad_id` 0 and not 0, a batch of one in float64. Then it replaces every layer by one that
# returns its input and records what it was given, to see in training mode exactly where
# your model drops: on the sum of embeddings and positions, on both sides, and nowhere else.
# It also calls your `encode` and `decode` on their own, in eval mode, as lesson 09 will (on
# other sentences than the `forward` it has just run), so the masks must not depend on
# `self.training`, nor on anything kept from an earlier call.

# %%
assembly_ok = check.EncoderDecoder(EncoderDecoder)

# %% [markdown]
# ### The course's model: `course.transformer.Transformer`
#
# `Transformer(src_vocab, tgt_vocab, d_model=512, n_heads=8, n_layers=6, d_ff=2048,
# dropout=0.1, norm_first=False, max_len=5000, pad_id=0, tie_embeddings=False,
# positions="sinusoidal", *, fused=False)` is the same model (`positions="rotary"` is lesson
# 05's section 8, `fused=True` lesson 10's fused kernel), with a few conveniences:
#
# - `src_embed`, `tgt_embed` are lesson 05's `TokenEmbedding` (the table in `.embedding`,
#   multiplied by $\sqrt{d_{model}}$ inside), and `pos` its `PositionalEncoding` (adds the
#   table, then drops), shared by both sides;
# - `forward(src, tgt, src_mask=None, tgt_mask=None)`, `encode(src, src_mask=None)` and
#   `decode(tgt, memory, src_mask=None, tgt_mask=None)` check their inputs (token ids in the
#   vocabulary, no longer than `max_len`) and build from `pad_id` the masks they can:
#   `forward` both, `encode` the source's padding mask, `decode` the decoder mask. `decode`
#   is given no source tokens, so it cannot build the source mask: with `src_mask=None` its
#   cross-attention sees every memory position, the source's pads included. **A padded batch
#   must pass `decode` the source mask, `padding_mask(src, model.pad_id)`**, the one `encode`
#   built (checked below);
# - every matrix starts Xavier-uniform, as `torch.nn.Transformer`'s layers do (the paper
#   does not say how it initialised; the checker copied its weights into yours, so your
#   class did not need to);
# - `torch.nn.Transformer` always ends both stacks with a LayerNorm, also in post-LN: one
#   reason to compare with it carefully, and the course's tests do, with its final norms
#   removed for post-LN.
#
# A padded batch of two sentence pairs, through the model of section 4; then `decode` on
# the same memory, with the source mask and without it (without it, the second sentence's
# target positions give some weight to the memory of its two source pads, and its logits
# change). The model's state dict differs from yours in one place, the tables' names
# (`src_embed.embedding.weight` there, `src_embed.weight` here), so your class, if it
# passed, can load its weights and must give the same logits:

# %%
src = torch.tensor([[ids[w] for w in ["le", "chat", "s'est", "assis", "<eos>"]],
                    [ids[w] for w in ["le", "chat", "<eos>", "<pad>", "<pad>"]]])     # (2, 5)
tgt_in = torch.tensor([[ids[w] for w in ["<bos>", "the", "cat", "sat", "down"]],
                       [ids[w] for w in ["<bos>", "the", "cat", "<pad>", "<pad>"]]])  # (2, 5)
src_pads = padding_mask(src, model.pad_id)                     # (B, 1, 1, T_src)
with torch.no_grad():
    memory = model.encode(src)                                 # (B, T_src, d_model)
    logits = model(src, tgt_in)                                # (B, T_tgt, tgt_vocab)
    decoded = model.decode(tgt_in, memory, src_pads)           # given the source mask
    unmasked = model.decode(tgt_in, memory)                    # not given it: sees the pads
print("memory:", tuple(memory.shape), " logits:", tuple(logits.shape))
print("the masks it built: source padding", tuple(src_pads.shape),
      " decoder", tuple(decoder_mask(tgt_in, model.pad_id).shape))
print("decode given the source mask gives forward's logits:",
      torch.allclose(decoded, logits, atol=1e-6))
print("decode without it: the first sentence's logits (no source pads) the same:",
      torch.allclose(unmasked[0], logits[0], atol=1e-6), "| the second's (2 source pads) different:",
      not torch.allclose(unmasked[1], logits[1], atol=1e-6))
print(f"{sum(p.numel() for p in model.parameters()):,} parameters")

# %%
if assembly_ok:
    yours = EncoderDecoder(len(words), len(words), d_model=32, n_heads=4, n_layers=2, d_ff=64,
                           pad_id=ids["<pad>"]).eval()
    weights = {name.replace(".embedding.", "."): value for name, value in model.state_dict().items()}
    yours.load_state_dict(weights)
    with torch.no_grad():
        print("your EncoderDecoder gives the course model's logits:",
              torch.allclose(yours(src, tgt_in), logits, atol=1e-5))
else:
    print("your EncoderDecoder has not passed its checker yet: this comparison waits for it")

# %% [markdown]
# ## 6. One set of layers, three kinds of model
#
# The encoder-decoder is one of three ways to use these layers, and the other two are
# better known today. Each is built below from the `course` modules in a few lines and run
# once. (Each real model differs in details: BERT and GPT learn their positions and use
# GELU, GPT-2 and T5 use pre-LN, T5 replaces positions by relative biases. The layer
# structure is the one you built.)
#
# **Encoder-only (BERT, Devlin et al. 2019).** A stack of encoder layers: every position
# sees every other, before and after it. Trained to fill in masked-out words, it gives each
# token a vector that depends on the whole sentence: for classifying, tagging, retrieval.

# %%
seed_everything(0)
V, d = len(words), 32
tokens = torch.tensor([[ids[w] for w in ["the", "cat", "sat", "down", "<pad>"]]])   # (1, T)
embed, positions = TokenEmbedding(V, d), PositionalEncoding(d, max_len=64)
encoder = nn.ModuleList([EncoderLayer(d, 4, 64) for _ in range(2)]).eval()
fill_in = nn.Linear(d, V)                                            # a word for every position
h = positions(embed(tokens))                                         # (1, T, d)
for layer in encoder:
    h = layer(h, padding_mask(tokens, ids["<pad>"]))                 # every position sees all
print("encoder-only: tokens", tuple(tokens.shape), "-> logits", tuple(fill_in(h).shape))

# %% [markdown]
# **Decoder-only (GPT, Radford et al. 2018).** A decoder layer without a source has no
# cross-attention: what is left, masked self-attention and the feed-forward network, *is an
# encoder layer with a causal mask*. Trained to predict the next token, it generates text.

# %%
decoder_only = nn.ModuleList([EncoderLayer(d, 4, 64) for _ in range(2)]).eval()
next_token = nn.Linear(d, V)
T = tokens.shape[1]


def gpt(tokens):                                                     # (B, T) -> (B, T, V)
    h = positions(embed(tokens))                                     # (B, T, d)
    for layer in decoder_only:
        h = layer(h, causal_mask(tokens.shape[1]))                   # position t sees 0..t
    return next_token(h)


changed = tokens.clone()
changed[0, 3] = ids["cat"]                                           # change the 4th token
with torch.no_grad():
    before, after = gpt(tokens), gpt(changed)
print("decoder-only: tokens", tuple(tokens.shape), "-> next-token logits", tuple(before.shape))
print("changing token 3 leaves the predictions at positions 0-2 unchanged:",
      torch.allclose(before[:, :3], after[:, :3]))

# %% [markdown]
# **Encoder-decoder (the paper; T5, Raffel et al. 2020).** Both stacks and cross-attention:
# for tasks that map one sequence to another, translation and summarisation. This is
# `course.transformer.Transformer`:

# %%
seq2seq = Transformer(V, V, d_model=d, n_heads=4, n_layers=2, d_ff=64).eval()
with torch.no_grad():
    logits = seq2seq(src, tgt_in)                                    # (B, T_tgt, V)
print("encoder-decoder: src", tuple(src.shape), "+ tgt", tuple(tgt_in.shape), "-> logits",
      tuple(logits.shape))

# %% [markdown]
# How far did these three shapes go? Stanford's CS224n lecture on Transformers (2021) showed
# the top of an aggregate leaderboard of language-understanding tasks (GLUE-style: one score
# averaged over many tasks), and every entry at the top was a Transformer:
#
# | model | score |
# |---|---|
# | DeBERTa / TuringNLRv4 | 90.8 |
# | MacALBERT + DKM | 90.7 |
# | StructBERT + TAPT | 90.6 |
# | ALBERT + DAAF + NAS | 90.6 |
# | ERNIE | 90.4 |
# | T5 | 90.3 |
#
# All but T5 are encoder-only descendants of BERT; T5 is an encoder-decoder that treats
# every task as mapping one text to another.

# %% [markdown]
# ## 7. Context, layer by layer
#
# Lesson 02 (section 4) showed a *contextual* vector: with hand-made embeddings, "it" moved
# toward "chicken" in one sentence and toward "road" in the other. A trained model should do
# the same to any word whose meaning depends on its neighbours: "bank" next to "river" should
# not end up with the vector of "bank" next to "money". At the input it cannot be otherwise:
# the embedding of "bank", plus the vector of its position, is the same in both sentences.
# Every layer of self-attention mixes in some of the other words. To watch it happen, a
# model has to have *learned* what context matters, so we train a small one (an untrained
# model mixes in context too, but no meaning).
#
# The task is made up and small (150 Adam steps on 64 sentences each train it): sentences of
# 8 tokens, mostly filler words `w0 ... w9`, with one "bank" and one cue word somewhere, from
# the river group (river, water, fish) or the money group (money, loan, cash). The model (embeddings,
# positions, 3 encoder layers of $d_{model} = 32$, no dropout) must say, at the position of
# "bank", which sense it has. Like everything in the course it runs on one CPU thread
# (`import course` sets it; lesson 04 says why: a second thread saves little on such small
# models and can cost much on a shared machine).

# %%
vocabulary = [f"w{i}" for i in range(10)] + ["bank", "river", "water", "fish", "money", "loan",
                                             "cash"]
index = {w: i for i, w in enumerate(vocabulary)}
BANK = index["bank"]
RIVER = torch.tensor([index[w] for w in ("river", "water", "fish")])
MONEY = torch.tensor([index[w] for w in ("money", "loan", "cash")])
T_sent, d_small = 8, 32


def sentences(n, generator):
    """n sentences with one 'bank' and one cue; the sense (0: river, 1: money) and where."""
    tokens = torch.randint(0, 10, (n, T_sent), generator=generator)          # fillers
    places = torch.rand(n, T_sent, generator=generator).argsort(dim=1)       # random order
    bank_at, cue_at = places[:, 0], places[:, 1]                             # two places
    sense = torch.randint(0, 2, (n,), generator=generator)
    which = torch.randint(0, 3, (n,), generator=generator)
    cue = torch.where(sense == 0, RIVER[which], MONEY[which])                # (n,)
    rows = torch.arange(n)
    tokens[rows, bank_at], tokens[rows, cue_at] = BANK, cue
    return tokens, bank_at, cue_at, sense


class SenseOfBank(nn.Module):
    def __init__(self, n_layers=3):
        super().__init__()
        self.embed = TokenEmbedding(len(vocabulary), d_small)
        self.pos = PositionalEncoding(d_small, max_len=T_sent)
        self.layers = nn.ModuleList([EncoderLayer(d_small, 4, 2 * d_small, dropout=0.0)
                                     for _ in range(n_layers)])
        self.read_out = nn.Linear(d_small, 2)

    def forward(self, tokens, bank_at):                            # (B, T), (B,)
        h = self.pos(self.embed(tokens))                           # (B, T, d): layer 0
        states = [h]
        for layer in self.layers:
            h = layer(h)                                           # (B, T, d)
            states.append(h)
        at_bank = h[torch.arange(len(tokens)), bank_at]            # (B, d)
        return self.read_out(at_bank), states                      # (B, 2), L + 1 x (B, T, d)


seed_everything(0)
generator = torch.Generator().manual_seed(0)
sense_model = SenseOfBank()
optimizer = torch.optim.Adam(sense_model.parameters(), lr=3e-3)
for _ in range(150):
    tokens, bank_at, _, sense = sentences(64, generator)
    loss = F.cross_entropy(sense_model(tokens, bank_at)[0], sense)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
tokens, bank_at, cue_at, sense = sentences(1000, torch.Generator().manual_seed(1))  # new ones
with torch.no_grad():
    accuracy = (sense_model(tokens, bank_at)[0].argmax(-1) == sense).float().mean().item()

# %% [markdown]
# Now the measurement. Take each of the 1000 test sentences twice, identical except for the
# cue word: "river" in one copy, "money" in the other. Read the vector of "bank" after every
# layer in both copies and compare them with the cosine similarity: 1 means the same
# direction, whatever the context; lower means the context has moved it.

# %%
rows = torch.arange(len(tokens))
with_river, with_money = tokens.clone(), tokens.clone()
with_river[rows, cue_at], with_money[rows, cue_at] = index["river"], index["money"]
with torch.no_grad():
    _, river_states = sense_model(with_river, bank_at)
    _, money_states = sense_model(with_money, bank_at)
similarity = [F.cosine_similarity(a[rows, bank_at], b[rows, bank_at], dim=-1).mean().item()
              for a, b in zip(river_states, money_states)]                 # one per layer

# %% tags=["nbval-ignore-output"]
print(f"sense of 'bank' right on {accuracy:.1%} of 1000 new sentences")
for layer, value in enumerate(similarity):
    name = "embeddings + positions" if layer == 0 else f"after layer {layer}"
    print(f"{name:>22}: cosine('bank' | river, 'bank' | money) = {value:+.3f}")
fig, axes = plt.subplots(1, 4, figsize=(15, 3.6))
for layer, ax in enumerate(axes):
    vectors = river_states[layer][rows, bank_at][:200]             # (200, d): river contexts
    vectors = torch.cat([vectors, money_states[layer][rows, bank_at][:200]])  # (400, d)
    centred = vectors - vectors.mean(dim=0)
    _, _, directions = torch.linalg.svd(centred, full_matrices=False)
    points = centred @ directions[:2].T                            # (400, 2): the 2 main axes
    ax.scatter(*points[:200].T, s=6, label="next to 'river'")
    ax.scatter(*points[200:].T, s=6, label="next to 'money'")
    ax.set_xlabel("principal direction 1")
    ax.set_ylabel("principal direction 2")
    ax.set_title("layer 0: embedding + position" if layer == 0 else f"after layer {layer}",
                 fontsize=10)
axes[0].legend(fontsize=8)
fig.suptitle("The vector of 'bank' in 200 sentences, each with 'river' and with 'money'")
plt.tight_layout()
plt.show()

# %% [markdown]
# At layer 0 the two copies of "bank" are the same vector (the dots of the two colours lie
# on top of each other: the dots fall on at most 8 spots, one per position "bank" can sit
# at). After the first
# layer the cue has already pulled them apart (cosine {{ similarity[1]:+.3f }}), every
# further layer pulls further
# ({{ similarity[2]:+.3f }} after layer 2), and after the last the two senses point apart,
# at {{ similarity[-1]:+.3f }} (a cosine of -1 would be exactly opposite). The numbers come
# from training, so their last digits move from machine to machine; the claims, checked:

# %%
print("the model knows the sense (right on more than 95% of new sentences):", accuracy > 0.95)
print("layer 0: 'bank' has the same vector in both contexts:", similarity[0] > 0.9999)
print("the similarity falls at every layer:",
      all(a > b for a, b in zip(similarity, similarity[1:])))
print("after the last layer the two senses point apart (cosine below 0):", similarity[-1] < 0)

# %% [markdown]
# ## 8. The paper's base and big models, counted
#
# Table 3 of the paper lists the **base** model ($N = 6$, $d_{model} = 512$,
# $d_{ff} = 2048$, $h = 8$) with 65 million parameters and the **big** one
# ($d_{model} = 1024$, $d_{ff} = 4096$, $h = 16$) with 213 million. Both translate
# English-German with "a shared source-target vocabulary of about 37000 tokens" (byte-pair
# encoding, §5.1), and "share the same weight matrix between the two embedding layers and the
# pre-softmax linear transformation" (§3.4): `tie_embeddings=True`.
#
# What the architecture implies, per layer, with $d = d_{model}$:
#
# $$
# \underbrace{4d^2 + 4d}_{\text{one attention}}, \qquad
# \underbrace{2\,d\,d_{ff} + d_{ff} + d}_{\text{feed-forward}}, \qquad
# \underbrace{2d}_{\text{one LayerNorm}},
# $$
#
# an encoder layer has one attention, one feed-forward and two norms; a decoder layer two
# attentions, one feed-forward and three norms; the tied embedding is $V d$, counted once,
# and the output layer adds its bias, $V$. Building the big model for real would take about
# {{ totals["big"] * 4 / 1e9:.2f }} GB of float32 (4 bytes a parameter); on PyTorch's
# `meta` device a module has shapes and no numbers, so it
# costs nothing and counts the same. `course.transformer.parameter_counts` sums the
# parameters of each component, a tied matrix once.

# %%
from course.transformer import PAPER_BASE, PAPER_BIG, PAPER_VOCAB, parameter_counts

counts, totals = {}, {}
for name, config in (("base", PAPER_BASE), ("big", PAPER_BIG)):
    with torch.device("meta"):                                 # shapes only, no memory
        paper_model = Transformer(PAPER_VOCAB, PAPER_VOCAB, **config, tie_embeddings=True)
    counts[name] = parameter_counts(paper_model)
    totals[name] = sum(p.numel() for p in paper_model.parameters())   # a tied matrix once
print(f"{'component':<26} {'base':>12} {'big':>12}")
for component in counts["base"]:
    base, big = counts["base"][component], counts["big"][component]
    note = {"target embedding": "  (tied: the source embedding's matrix)",
            "output projection": "  (its bias; its matrix is the shared embedding)"}.get(component, "")
    print(f"{component:<26} {base:>12,} {big:>12,}{note}")
print(f"{'total':<26} {totals['base']:>12,} {totals['big']:>12,}")
paper = {"base": 65e6, "big": 213e6}
print(f"{'the paper (Table 3)':<26} {paper['base']:>12,.0f} {paper['big']:>12,.0f}")
for name in ("base", "big"):
    print(f"{name}: ours / the paper's = {totals[name] / paper[name]:.3f}")

# %% [markdown]
# The same counting on a model small enough to build for real, against the formula written
# out by hand, so the table above is not the meta device's word alone:

# %%
def formula(d, d_ff, n_layers, vocab):
    attention, ff, norm = 4 * d * d + 4 * d, 2 * d * d_ff + d_ff + d, 2 * d
    encoder = n_layers * (attention + ff + 2 * norm)
    decoder = n_layers * (2 * attention + ff + 3 * norm)
    return encoder + decoder + vocab * d + vocab             # + the tied embedding, out's bias


small = Transformer(1000, 1000, d_model=64, n_heads=4, n_layers=2, d_ff=256, tie_embeddings=True)
print("a small real model:", sum(p.numel() for p in small.parameters()), "parameters; formula:",
      formula(64, 256, 2, 1000))
print("base by the formula:", formula(512, 2048, 6, PAPER_VOCAB) == totals["base"],
      "| big by the formula:", formula(1024, 4096, 6, PAPER_VOCAB) == totals["big"])

# %% [markdown]
# **Where the counts differ, honestly.** Ours: {{ totals["base"] / 1e6:.1f }} million for
# base ({{ 1 - totals["base"] / paper["base"]:.0% }} under the paper's 65),
# {{ totals["big"] / 1e6:.1f }} million for big
# ({{ totals["big"] / paper["big"] - 1:.1% }} over its 213). The architecture fixes everything
# but the vocabulary, and the paper gives that only as "about 37000" and does not say how it
# counted. What would make each number come out exactly?

# %%
vocab_needed, vocab_rounding = {}, {}
for name, config in (("base", PAPER_BASE), ("big", PAPER_BIG)):
    without_vocabulary = totals[name] - PAPER_VOCAB * (config["d_model"] + 1)
    vocab_needed[name] = (paper[name] - without_vocabulary) / (config["d_model"] + 1)
    vocab_rounding[name] = [(paper[name] + half - without_vocabulary) / (config["d_model"] + 1)
                            for half in (-0.5e6, 0.5e6)]  # counts that round to paper[name]
    print(f"{name}: the layers alone hold {without_vocabulary:,}; {paper[name] / 1e6:.0f}M "
          f"would need a vocabulary of {vocab_needed[name]:,.0f} tokens (for any count that "
          f"rounds to {paper[name] / 1e6:.0f}M: {vocab_rounding[name][0]:,.0f} to "
          f"{vocab_rounding[name][1]:,.0f})")
untied = {name: totals[name] + 2 * PAPER_VOCAB * config["d_model"]
          for name, config in (("base", PAPER_BASE), ("big", PAPER_BIG))}
print(f"untied (three {PAPER_VOCAB} x d_model matrices): base {untied['base']:,}, "
      f"big {untied['big']:,}")
base_counts = counts["base"]
where = {"the feed-forward networks": base_counts["encoder feed-forward"]
         + base_counts["decoder feed-forward"],
         "the attentions": base_counts["encoder self-attention"]
         + base_counts["decoder self-attention"] + base_counts["decoder cross-attention"],
         "the shared embedding": base_counts["source embedding"]}
print("base, where the parameters sit: "
      + ", ".join(f"{part} {n / totals['base']:.0%}" for part, n in where.items())
      + f" (cross-attention: {base_counts['decoder cross-attention'] / where['the attentions']:.0%}"
      " of the attentions)")

# %% [markdown]
# - **Not the vocabulary alone.** Base would need about {{ vocab_needed["base"]:,.0f }}
#   tokens, big about {{ vocab_needed["big"]:,.0f }}: no single vocabulary gives both
#   numbers, so at least one of them was counted with some other
#   difference (a rounded vocabulary, a different count of biases, or the model as the
#   authors' code built it; the paper does not say).
# - **The tying is right.** Untied, the models would hold {{ untied["base"] / 1e6:.0f }} and
#   {{ untied["big"] / 1e6:.0f }} million parameters, far from 65 and 213: the paper's
#   numbers count one shared matrix.
# - **Small parts do not explain it.** All LayerNorms together are
#   {{ base_counts["encoder LayerNorms"] + base_counts["decoder LayerNorms"]:, }} parameters
#   in base, the output bias {{ base_counts["output projection"]:, }}; pre-LN's two final
#   norms would add {{ 2 * 2 * PAPER_BASE["d_model"]:, }}. The gaps are
#   {{ (paper["base"] - totals["base"]) / 1e6:.1f }} and
#   {{ (totals["big"] - paper["big"]) / 1e6:.1f }} million.
#
# So the table agrees with the paper to a few per cent, but rounding does not close the
# gap: a base count that rounds to 65 million needs a vocabulary of
# {{ vocab_rounding["base"][0]:,.0f }} to {{ vocab_rounding["base"][1]:,.0f }} tokens, a big
# count that rounds to 213 million one of {{ vocab_rounding["big"][0]:,.0f }} to
# {{ vocab_rounding["big"][1]:,.0f }} (printed above), and the two ranges do not meet. The
# rest needs some difference the paper does not publish, so we cannot reproduce its exact
# counts. Where the parameters sit is clear either way (the cell above's last line): the
# feed-forward networks hold
# {{ where["the feed-forward networks"] / totals["base"]:.0% }} of base, the attentions
# {{ where["the attentions"] / totals["base"]:.0% }} (a third of them cross-attention), the
# shared embedding {{ where["the shared embedding"] / totals["base"]:.0% }}.

# %% [markdown]
# ## What's next
#
# The model is complete, and untrained. Lesson 09 trains it on a translation-like task with
# label smoothing and the paper's warm-up schedule, decodes with greedy and beam search
# (your `greedy_decode`), and reads its cross-attention maps as alignments between source
# and target words.
