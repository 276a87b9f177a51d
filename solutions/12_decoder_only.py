# %% [markdown]
# # 12 · One stack, no encoder: a small GPT
#
# **The idea.** Lesson 11's translator reads a French sentence with its encoder and writes
# the English one with its decoder, one token at a time, each token chosen from what came
# before it and from the French. Take the French away and what is left is a model that
# continues English: given the start of a sentence, it scores every possible next token.
# Train it on plain text to predict each next token and it becomes a **language model**;
# draw its tokens one after another and it **writes**. This is the family of GPT and of
# most of today's large language models: one stack of the layers you built, under a causal
# mask.
#
# In this lesson you will
# 1. turn the English side of lesson 11's Tatoeba file into subword sequences;
# 2. build the decoder-only model from the course's own layers (pre-LN, rotary positions,
#    tied embeddings) and see why each choice;
# 3. learn what **perplexity** measures, and compute the floor a model must beat: unigram
#    and bigram counts on the same held-out sentences;
# 4. see what **temperature**, **top-k** and **top-p** do to a distribution, and write
#    `sample_next` (the exercise);
# 5. train the model for {{ STEPS }} steps here ({{ train_seconds:.0f }} s in the run stored
#    with this notebook; {{ config["time_budget"] / 60:.0f }} minutes with the command line)
#    and score it;
# 6. let it write: greedy against sampling, and how greedy repeats itself;
# 7. measure what lesson 10's KV cache saves when generating;
# 8. go back to lesson 11: the translator is this model plus an encoder and
#    cross-attention, and the three families of Transformers.

# %%
import itertools
import math
from collections import Counter

import matplotlib.pyplot as plt
import torch

from course import check, lm
from course.data import BOS_ID, load_task
from course.layers import DecoderLayer, EncoderLayer
from course.train import CONFIGS, train_steps
from course.utils import device, mps_checked, seed_everything

SEED = 0                 # the data split, the weights, the batches' order and every draw below
seed_everything(SEED)
torch.set_printoptions(precision=3, sci_mode=False)
# Where the lesson trains. The stored outputs were made on "cpu", the device the course's
# tests use; training rounds differently on another CPU, and more so on a GPU.
# device("auto") takes CUDA, then Apple's MPS, then the CPU (or name "cuda" or "mps"):
# usually faster, but the trained numbers, and the checks printed below, can come out
# differently.
DEVICE = device("cpu")

# %% [markdown]
# As in lesson 10, the lesson runs on one CPU thread, the course's policy: the model is
# small, a second thread gains it little, and one thread's timings are steadier on a busy
# machine.

# %% [markdown]
# ## 1. The data: English sentences in BPE pieces
#
# The text is the English side of lesson 11's file, cleaned as `fra-eng-full` cleaned it
# (as people wrote it: capitals, apostrophes, punctuation), every distinct sentence of at most
# {{ lm.tatoeba.FULL_MAX_WORDS }} words once.
# {{ lm.LM_TEST_FRACTION:.0% }} of the sentences are held out to measure the model. The split
# is **grouped**, as in lesson 11: "I'm tired." and "I'm tired!" differ only in their last
# character, and a model that saw one in training would find the other easy, so sentences
# that differ only in case or final punctuation go to the same side. The BPE vocabulary of
# {{ len(data.vocab):, }} pieces (lesson 11, section 4) is trained on the training sentences
# only.
#
# `load_task("lm-en", seed)` returns this data (a `course.lm.LMData`: id lists, not the
# (source, target) pairs of a translation task). Each sentence becomes
# `<bos> pieces <eos>`: the model is given `<bos>` and must write the rest, including the
# end.

# %%
data = load_task("lm-en", seed=SEED)
print(data)
for text, ids in list(zip(data.train_text, data.train))[1000:1003]:
    print(f"\n{text!r}")
    print("  pieces:", " ".join(data.vocab.pieces(text)))
    print("  ids:   ", ids)

# %% [markdown]
# {{ len(data.train):, }} training and {{ len(data.test):, }} held-out sentences. Every piece is a
# token to predict. How long are the sequences?

# %%
lengths = [len(s) for s in data.train]
fig, ax = plt.subplots(figsize=(7, 3))
ax.hist(lengths, bins=range(3, max(lengths) + 2), color="C0")
ax.set_xlabel("tokens per sequence (<bos> and <eos> included)")
ax.set_ylabel("training sentences")
ax.set_title("lm-en: sequence lengths")
plt.show()
n_targets = sum(len(s) - 1 for s in data.test)
print(f"median {sorted(lengths)[len(lengths) // 2]} tokens, longest {max(lengths)}; "
      f"the held-out split has {n_targets:,} tokens to predict")

# %% [markdown]
# ## 2. The model: the decoder without its source
#
# Lesson 08 (section 6) built a decoder-only model in a few lines: a decoder layer without
# a source has no cross-attention, and what is left (masked self-attention, then the
# feed-forward network) *is an encoder layer with a causal mask*. `course.lm.LanguageModel`
# is that, with three choices made as GPT-2 (pre-LN, tied embeddings) and its successors
# (rotary positions) make them:
#
# $$
# \text{tokens } (B, T) \xrightarrow{\text{embed}} (B, T, d_{model})
# \xrightarrow{n_{layers} \times \text{layer}} \xrightarrow{\text{LayerNorm}}
# \xrightarrow{E^\top} \text{logits } (B, T, V)
# $$
#
# - **Pre-LN** (lesson 07): each sub-layer reads a normalised copy, $x + \text{attn}(\text{LN}(x))$,
#   so the residual stream carries the gradient from the loss to the first layer untouched.
#   Such a stack trains with little or no warm-up of the learning rate (Xiong et al. 2020,
#   "On Layer Normalization in the Transformer Architecture"); this lesson still uses
#   {{ config["warmup"] }} steps. The stream itself is never normalised, so one LayerNorm is
#   added after the last layer.
# - **Tied embeddings** (Press and Wolf 2017; the Transformer paper's §3.4): the output layer's weight
#   *is* the input embedding matrix $E$ $(V, d_{model})$. A token's score is the dot product
#   of the final (normalised) vector with that token's own embedding, plus a bias of the
#   token's own: one matrix, learned from both ends.
# - **Rotary positions** (lesson 05): no position table is added to the embeddings;
#   instead every attention rotates its queries and keys by their positions, so a score
#   depends on the two tokens' content and on their positions only through the offset
#   between them (how far apart they are, not where they are): in the first layer, "is"
#   scores "Tom" just before it the same at the start of a sentence or later in it. The KV cache of lesson 10 needs
#   nothing new (each cached key was rotated once, by its own position). GPT-NeoX and LLaMA
#   use them; GPT and GPT-2 learned a table of positions instead.
#
# The size is the command line's, `CONFIGS["lm-en"]`:

# %%
config = CONFIGS["lm-en"]
print({k: config[k] for k in ("d_model", "n_heads", "n_layers", "d_ff", "dropout", "batch_size",
                              "lr", "warmup", "time_budget")})
seed_everything(SEED)
model = lm.LanguageModel(len(data.vocab), d_model=config["d_model"], n_heads=config["n_heads"],
                         n_layers=config["n_layers"], d_ff=config["d_ff"],
                         dropout=config["dropout"], max_len=max(config["max_len"], data.max_len))
print(model.layers[0])

# %%
V, d_model = len(data.vocab), model.d_model
n_params = sum(p.numel() for p in model.parameters())
print("one matrix for input and output:", model.out.weight is model.embed.embedding.weight)
print(f"{n_params:,} parameters; the tied matrix E ({V}, {d_model}) holds {V * d_model:,} of them, "
      f"which an untied output layer would add again")

# %% [markdown]
# {{ n_params:, }} parameters, {{ 100 * V * d_model / n_params:.0f }}% of them in the one tied
# matrix.
#
# A position must not see the tokens after it, or predicting them would be copying.
# Change the last tokens of a sequence: the logits at the positions before them do not move.

# %%
model.eval()
tokens = torch.tensor([data.train[len(data.train) // 2]])   # (1, T): a sentence from the middle
changed = tokens.clone()
changed[0, 4:] = 3                                          # <unk> from position 4 on
with torch.no_grad():
    before, after = model(tokens), model(changed)           # (1, T, V) each
print("positions 0-3 unchanged:", torch.allclose(before[:, :4], after[:, :4], atol=1e-6),
      "| position 4 on changed:", not torch.allclose(before[:, 4:], after[:, 4:]))

# %% [markdown]
# ## 3. The objective, and what perplexity means
#
# A language model gives a sequence the probability of each token given the ones before it,
#
# $$
# p(x_1, \dots, x_T) = \prod_{t=1}^{T} p(x_t \mid x_{<t}),
# $$
#
# and is trained to make its training text likely, then judged on how likely it finds the
# held-out text: the loss is the mean of $-\log p(x_t \mid x_{<t})$ over every token to
# predict (cross-entropy, in nats). The model reads `tokens[:, :-1]` and its targets are
# `tokens[:, 1:]`, the same sequence shifted by one: one forward pass trains all $T - 1$
# predictions of a sequence of $T$ tokens at once (teacher forcing, lesson 06 section 1 and
# lesson 08 section 4).
#
# **Perplexity** is that loss brought back from the log scale:
#
# $$
# \text{PPL} = \exp\Big(-\frac{1}{N} \sum_{i=1}^{N} \log p(x_i \mid x_{<i})\Big),
# $$
#
# where the sum runs over all $N$ tokens to predict in the held-out text, every sentence's
# together ({{ n_targets:, }} here), each given the tokens before it in its sentence. A model
# that spreads its probability uniformly over $K$ tokens pays $\log K$ at every step, so
# its perplexity is exactly $K$. A perplexity of 40 therefore means: on average,
# the model is as unsure of the next token as if it had to pick among 40 equally likely
# ones. Lower is better; 1 would be certainty. An untrained model is close to uniform over
# the whole vocabulary (all {{ len(data.test):, }} held-out sentences, the tokens every
# perplexity below is measured on):

# %%
with torch.no_grad():
    untrained = lm.perplexity(model, data.test)
print(f"untrained: perplexity {untrained:,.0f}, against V = {V:,} (uniform guessing)")

# %% [markdown]
# Perplexities can only be compared on the **same tokens**: the same held-out sentences, cut
# into the same pieces (a model of words and a model of characters have different $V$ and
# different numbers of tokens to predict). Two models of counting give the floor, on exactly
# the held-out split above:
#
# - **unigram**: $p(w)$, how often each piece occurs in training (add-one smoothing, so an
#   unseen piece is not impossible). It knows which pieces are common, nothing about order.
# - **bigram**: $p(w \mid v)$, how often $w$ follows $v$ in training, mixed with the unigram
#   where the counts are thin (Witten-Bell: a piece followed by many different pieces
#   trusts its counts less). It knows one token of context.
#
# A Transformer that reads the whole prefix should beat both.

# %%
unigram = lm.unigram_perplexity(data.train, data.test, V)
bigram = lm.bigram_perplexity(data.train, data.test, V)
print(f"held-out perplexity, seed {SEED} split, {n_targets:,} tokens:")
print(f"  uniform over the vocabulary {V:>8,.1f}")
print(f"  unigram                     {unigram:>8.1f}")
print(f"  bigram                      {bigram:>8.1f}")
dont_pieces = data.vocab.pieces("I don't")
print("\"I don't\" in pieces:", " ".join(dont_pieces))

# %% [markdown]
# One token of context divides the perplexity by {{ unigram / bigram:.1f }}. What the bigram
# cannot see is everything further back: "I don't" is the pieces
# `{{ " ".join(dont_pieces) }}` (the last line above), and to guess what follows, the bigram
# sees only the `{{ dont_pieces[-1] }}`.
#
# ## 4. From scores to a choice: temperature, top-k, top-p
#
# At each step the model gives logits $z$ $(V,)$ for the next token. How to choose one?
#
# - **Greedy**: the argmax. Deterministic, and (section 6) prone to repeating itself.
# - **Sampling** draws from $\operatorname{softmax}(z)$: every token as likely as the model
#   thinks it is. Varied text, but the long tail of unlikely tokens, each rare, adds up:
#   over a sentence, one of them is likely to be drawn, and one bad token derails the rest.
#
# Three knobs reshape the distribution before the draw. **Temperature** $\tau$ divides the
# logits:
#
# $$
# p_i(\tau) = \frac{e^{z_i / \tau}}{\sum_j e^{z_j / \tau}} .
# $$
#
# $\tau = 1$ is the model's own distribution; $\tau < 1$ sharpens it toward the argmax
# ($\tau \to 0$ is greedy); $\tau > 1$ flattens it toward uniform. Ten logits at four
# temperatures:

# %%
z = torch.tensor([3.0, 2.5, 2.0, 1.2, 1.0, 0.5, 0.0, -0.5, -1.0, -2.0])   # (V,) with V = 10
fig, axes = plt.subplots(1, 4, figsize=(11, 2.8), sharey=True)
for ax, tau in zip(axes, [0.25, 0.5, 1.0, 2.0]):
    p = (z / tau).softmax(dim=-1)                                        # (V,)
    ax.bar(range(len(z)), p, color="C0" if tau != 1.0 else "C1")
    ax.set_title(f"τ = {tau}: top token {p[0]:.2f}")
    ax.set_xlabel("token (by logit)")
axes[0].set_ylabel("probability")
fig.suptitle("softmax(z / τ): the same logits at four temperatures", y=1.04)
plt.show()

# %% [markdown]
# **Top-k** keeps only the $k$ tokens with the largest logits (and any token tied with the
# $k$-th), sets the rest to probability 0 and renormalises: the tail is cut at a fixed
# *number* of tokens. But the right number depends on the context: after "I'm very"
# hundreds of adjectives fit, after the pieces of "I don'" only `t` does.
#
# **Top-p** (nucleus sampling, Holtzman et al. 2020) cuts at a fixed *mass* instead: sort
# the tokens by probability and keep the smallest set of most probable ones whose total
# reaches $p$. The token that crosses $p$ (the boundary token) is kept; a confident
# distribution keeps one or two tokens, a flat one keeps many. On the same ten logits:

# %%
p = z.softmax(dim=-1)                                                    # (V,), τ = 1
sorted_p, order = p.sort(descending=True)
above = sorted_p.cumsum(dim=0) - sorted_p                                # mass ranked above each
for top_p in [0.5, 0.8, 0.95]:
    kept = order[above < top_p]
    print(f"top-p {top_p}: keeps {len(kept)} tokens {kept.tolist()}, holding "
          f"{p[kept].sum():.3f} of the mass")
print("probabilities:", p)

# %% [markdown]
# When knobs are combined, the order is the usual one: temperature first, then top-k, then
# top-p on what top-k left (renormalised), then one draw.
#
# ### Exercise: `sample_next`
#
# Write `sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None)`:
#
# - `logits`: `(B, V)` scores, one row per sequence; return `(B,)` token ids (`torch.long`).
#   A single row `(V,)` gives a 0-d id.
# - `temperature == 0`: greedy, the argmax of each row; nothing is drawn.
# - otherwise divide by the temperature; with `top_k`, keep the tokens whose logit is at
#   least the $k$-th largest; with `top_p`, keep a token when the tokens ranked above it
#   hold less than `top_p` (so the boundary token stays); `None` means no cut.
# - draw one id per row with `torch.multinomial(probs, 1, generator=generator)`: a seeded
#   generator makes the draws repeatable, and leaves torch's global random state alone
#   (`torch.manual_seed` elsewhere in a program must not change your samples, nor yours
#   theirs).
# - do not modify `logits`. A tiny temperature (0.001) must not overflow: `softmax` copes
#   with large logits, `exp` alone does not.
#
# The checker cannot ask for exact ids (a correct sampler may draw them in many ways), so
# it draws {{ check.sampling.DRAWS:, }} tokens for every row of every case and tests the frequencies against the
# right distribution, with tolerances that a correct answer fails with probability below
# $10^{-9}$ (derived in `course/check/sampling.py`).


# %%
def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    ### BEGIN SOLUTION
    if temperature == 0:
        return logits.argmax(dim=-1)                                    # (B, V) -> (B,); (V,) -> ()
    scores = logits.double() / temperature                              # a new tensor, float64
    if top_k is not None and top_k < scores.shape[-1]:
        kth = scores.topk(top_k, dim=-1).values[..., -1:]               # (B, 1): the k-th largest
        scores = scores.masked_fill(scores < kth, -math.inf)            # ties with it stay
    probs = scores.softmax(dim=-1)                                      # (B, V)
    if top_p is not None and top_p < 1:
        sorted_probs, order = probs.sort(dim=-1, descending=True)       # (B, V) each
        above = sorted_probs.cumsum(dim=-1) - sorted_probs              # mass ranked above each
        cut = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, order, above >= top_p)
        probs = probs.masked_fill(cut, 0.0)                             # (B, V), boundary kept
    rows = probs.reshape(-1, probs.shape[-1])                           # (B, V); (V,) -> (1, V)
    ids = torch.multinomial(rows, 1, generator=generator)               # (B, 1)
    return ids.reshape(logits.shape[:-1])                               # (B,), or () for (V,)
    ### END SOLUTION


# %%
check.sample_next(sample_next)

# %% [markdown]
# The rest of the lesson uses the course's version, `course.lm.sample_next`, through
# `course.lm.generate`.
#
# ## 5. Training, briefly
#
# The loop is lesson 09's `train_steps`, given the next-token loss in place of the
# translation loss, and a simpler schedule: a batch of
# `<bos> pieces <eos>` rows, the next-token loss (`course.lm.lm_loss`: the model reads
# `tokens[:, :-1]` and must predict `tokens[:, 1:]`, padding ignored, no label smoothing),
# AdamW with a short linear warm-up of the learning rate and then a constant rate (lesson 09
# used Adam with the paper's warm-up and $1/\sqrt{\text{step}}$ decay). AdamW is Adam with
# **decoupled weight decay** (Loshchilov and Hutter 2019): each step also shrinks every
# weight by the fraction `lr` × `weight_decay` of itself, apart from the gradient's step. Here, as on the command line, it
# is torch's default, {{ optimizer.param_groups[0]["weight_decay"] }}, on every parameter (the
# tied embedding, the biases and the LayerNorm gains included; many GPT recipes exempt the
# last two). Gradients are clipped to norm {{ config["clip_norm"]:g }}. The command line runs
# this loop for {{ config["time_budget"] / 60:.0f }} minutes; here it runs for {{ STEPS }} steps,
# {{ train_seconds:.0f }} s on one CPU thread in the run stored with this notebook.

# %% tags=["nbval-ignore-output"]
STEPS = 300
seed_everything(SEED)
a_batch = next(lm.lm_batches(data.train, config["batch_size"]))
DEVICE = mps_checked(DEVICE, model, lm.lm_loss, a_batch)      # MPS: its loss against the CPU's
model = model.to(DEVICE)
optimizer = torch.optim.AdamW(model.parameters(), lr=config["lr"], betas=(0.9, 0.98),
                              weight_decay=0.01)                        # torch's default
warmup = torch.optim.lr_scheduler.LambdaLR(
    optimizer, lambda step: min(1.0, (step + 1) / config["warmup"]))    # linear, then constant
generator = torch.Generator().manual_seed(SEED)                         # the batches' order
batches = (tokens for epoch in itertools.count()                        # a new shuffle each pass
           for tokens in lm.lm_batches(data.train, config["batch_size"], shuffle=True,
                                       generator=generator))            # tokens (B, T)
# lesson 09's loop; the loss is lm_loss(model, tokens), so there is no criterion (None)
log = train_steps(model, batches, optimizer, None, STEPS, loss_fn=lm.lm_loss, scheduler=warmup,
                  clip_norm=config["clip_norm"], device=DEVICE, progress_every=5.0)
losses, train_seconds = log.losses, log.seconds
model = model.to("cpu")                                # the rest of the lesson reads it on the CPU
passes = STEPS * config["batch_size"] / len(data.train)
print(f"{STEPS} steps ({passes:.2f} passes over the training sentences) in {train_seconds:.0f} s")

# %%
fig, ax = plt.subplots(figsize=(7, 3))
ax.plot(losses, color="0.7", linewidth=0.8, label="per batch")
window = 20
running = [sum(losses[max(0, i - window + 1): i + 1]) / len(losses[max(0, i - window + 1): i + 1])
           for i in range(len(losses))]
ax.plot(running, color="C0", label=f"running mean of {window}")
for name, value, color in [("unigram", unigram, "C3"), ("bigram", bigram, "C2")]:
    ax.axhline(math.log(value), color=color, linestyle="--", label=f"{name} (held out)")
ax.set_xlabel("step")
ax.set_ylabel("cross-entropy (nats)")
ax.set_ylim(0, math.log(V) + 0.5)
ax.set_title("lm-en: training loss against the baselines' held-out loss")
ax.legend()
plt.show()

# %% [markdown]
# The dashed lines are the baselines' held-out losses, $\log$ of their perplexities. On the
# held-out split:

# %% tags=["nbval-ignore-output"]
model.eval()
ppl = lm.perplexity(model, data.test)
print(f"after {len(losses)} steps: perplexity {ppl:.1f}   (unigram {unigram:.1f}, bigram {bigram:.1f})")
print(f"below the unigram: {ppl < unigram} | below the bigram: {ppl < bigram}")

# %% [markdown]
# In the run stored with this notebook, {{ STEPS }} steps ({{ passes:.2f }} of one pass over the
# training sentences) bring the held-out perplexity from {{ untrained:,.0f }} to {{ ppl:.1f }}:
# below the unigram's {{ unigram:.1f }}, not yet at the bigram's {{ bigram:.1f }} (the check
# above). The command line's {{ config["time_budget"] / 60:.0f }} minutes go further. Measured
# with `python -m course.train --task lm-en --seed 0` on the course's two-core machine (a run
# of the command line, section 9, not of this notebook), seed 0 reached perplexity 26.7 in
# 2,750 steps, 31% below its split's bigram.
#
# ## 6. Letting it write
#
# `course.lm.generate` starts from `<bos>` and the prompt's pieces and adds one token at a
# time, each chosen by `sample_next` from the newest position's logits, until the model
# writes `<eos>`. The same prompts with each way of choosing. Every line gets a fresh
# generator seeded {{ SEED }}, so all the samplers draw with the same random numbers: where two
# lines of one prompt differ, the setting made the difference, not the luck of the draw.

# %% tags=["nbval-ignore-output"]
prompts = ["I", "Tom", "Where is", "Can you"]
settings = {
    "greedy": dict(temperature=0.0),
    "τ = 1": dict(temperature=1.0),
    "τ = 0.7": dict(temperature=0.7),
    "top-k 20": dict(temperature=1.0, top_k=20),
    "top-p 0.9": dict(temperature=1.0, top_p=0.9),
}


def write(prompt, max_new_tokens=30, seed=SEED, **setting):
    ids = torch.tensor([[BOS_ID, *data.vocab.encode(prompt)]])           # (1, T0)
    generator = torch.Generator().manual_seed(seed)                      # a fresh one per line
    out = lm.generate(model, ids, max_new_tokens, generator=generator, **setting)  # (1, T0 + n)
    return data.vocab.decode(out[0])


lines = {prompt: {name: write(prompt, **setting) for name, setting in settings.items()}
         for prompt in prompts}
for prompt, by_setting in lines.items():
    print(f"--- {prompt!r}")
    for name, text in by_setting.items():
        print(f"  {name:10} {text}")
same_as_t1 = {name: sum(lines[p][name] == lines[p]["τ = 1"] for p in prompts)
              for name in ("τ = 0.7", "top-k 20", "top-p 0.9")}
print(f"\nprompts (of {len(prompts)}) on which a sampler writes τ = 1's text: {same_as_t1}")

# %% [markdown]
# Read the greedy lines first. Greedy takes the single most likely token at every step, so
# it keeps to the most common phrases, and one prompt always gets one text. The samplers
# write more varied sentences, many of them not English yet: {{ STEPS }} steps of training
# are little. The command line's longer-trained model writes better ones (section 9).
#
# Where a sampler writes τ = 1's very text (the last line counts the prompts on which each
# does), that is the shared seed. Top-k and top-p only cut tokens away, and
# `torch.multinomial`, asked for one draw, takes one random number $q_i$ per token from the
# exponential distribution and returns the token with the largest $p_i / q_i$ (the
# exponential form of the Gumbel-max trick; this is how PyTorch implements that one draw,
# not a promise of its documentation, and the first two checks below confirm it on the
# machine that runs them). A token that a cut removes has $p_i = 0$, and a token kept keeps
# its place in the order of $p_i / q_i$ after the renormalisation, so with the same random numbers they pick
# τ = 1's token whenever they keep it: a line changes only from
# the first step where τ = 1 drew a token they cut. τ = 0.7 moves probability from every
# unlikely token to the likely ones, so it can change the token even where τ = 1 drew a
# likely one, one that top-p 0.9 keeps (the last line of the counts below, checked after
# them). The token after "I", drawn 1,000 times with one generator seeded {{ SEED }} for each
# setting (the counts come from this notebook's trained model, so they can differ from one
# CPU to another; the first two checks after them hold wherever PyTorch draws as described
# above, whatever the model, the third by a wide margin):

# %% tags=["nbval-ignore-output"]
with torch.no_grad():
    after_i = model(torch.tensor([[BOS_ID, *data.vocab.encode("I")]]))[0, -1]  # (V,)
logits_1000 = after_i.repeat(1000, 1)                                 # (1000, V): 1,000 draws
drawn = {name: lm.sample_next(logits_1000, generator=torch.Generator().manual_seed(SEED),
                              **settings[name])                      # (1000,) each
         for name in ("τ = 1", "τ = 0.7", "top-k 20", "top-p 0.9")}
probs_i = after_i.double().softmax(dim=-1)                # (V,), in float64 as sample_next
sorted_p, order = probs_i.sort(descending=True)
nucleus = order[(sorted_p.cumsum(dim=0) - sorted_p) < 0.9]            # what top-p 0.9 keeps
kept = {"top-k 20": torch.isin(drawn["τ = 1"], after_i.topk(20).indices),  # (1000,) each: τ = 1's
        "top-p 0.9": torch.isin(drawn["τ = 1"], nucleus)}                  # token kept by the cut?
for name in ("τ = 0.7", "top-k 20", "top-p 0.9"):
    same = int((drawn[name] == drawn["τ = 1"]).sum())
    print(f"{name:10} draws τ = 1's token {same:>4} times of 1000")
moved = int(((drawn["τ = 0.7"] != drawn["τ = 1"]) & kept["top-p 0.9"]).sum())
print(f"τ = 0.7 draws another token in {moved} of the {int(kept['top-p 0.9'].sum())} draws "
      f"where τ = 1's token is one top-p 0.9 keeps")

# %%
for name, kept_it in kept.items():
    print(f"{name} draws τ = 1's token exactly when it keeps it:",
          torch.equal(drawn[name] == drawn["τ = 1"], kept_it))
print("τ = 0.7 draws another token in some of the draws where τ = 1's token is one top-p 0.9 "
      "keeps:", moved > 0)

# %% [markdown]
# ### How greedy repeats itself
#
# Greedy is a deterministic function of the context: the same context, the same next
# token, whichever prompt led to it. And the most likely token need not be likely: a model
# that is unsure spreads its probability thinly, and greedy writes the argmax however small
# it is. Each step of greedy's continuation of "I", with the probability of the piece it
# chose and of the runner-up:

# %% tags=["nbval-ignore-output"]
ids = torch.tensor([[BOS_ID, *data.vocab.encode("I")]])            # (1, T0)
out = lm.generate(model, ids, max_new_tokens=30, temperature=0.0)  # (1, T0 + n)
with torch.no_grad():
    probs = model(out[:, :-1])[0].softmax(dim=-1)                  # (T0 + n - 1, V): each next token
best = probs.topk(2, dim=-1)                                       # values, indices: (T0 + n - 1, 2)
steps = range(ids.shape[1] - 1, out.shape[1] - 1)                  # position t predicts t + 1
print(f"{'context ends':>14}  {'greedy writes':>14}  {'p':>5}   {'runner-up':>12}  {'p':>5}")
for t in steps:
    (p1, p2), (i1, i2) = best.values[t].tolist(), best.indices[t].tolist()
    print(f"{data.vocab.itos[out[0, t]]:>14}  {data.vocab.itos[i1]:>14}  {p1:5.3f}   "
          f"{data.vocab.itos[i2]:>12}  {p2:5.3f}")
chosen = best.values[steps.start:steps.stop, 0]                    # (n,): p of each piece written
unsure = int((chosen < 0.5).sum())
least_piece = data.vocab.itos[best.indices[steps.start + int(chosen.argmin()), 0]]
least_p = chosen.min().item()
print(f"\n{unsure} of {len(chosen)} pieces written with p below 0.5; the least likely "
      f"{least_piece!r}, p = {least_p:.3f}")

# %% [markdown]
# {{ unsure }} of the {{ len(chosen) }} pieces greedy wrote had probability below one half, the
# least likely `{{ least_piece }}` at {{ least_p:.3f }}. However unsure the model, greedy never
# picks the runner-up: whatever is most likely after a context is written after it every
# time. In large models trained on long documents repetition also feeds itself: Holtzman et
# al. (2020) found the probability of a repeated phrase *rising* with each repetition in
# GPT-2, a positive feedback loop that greedy text can fall into.
#
# This model is trained on single sentences that end with `<eos>`. What does its repetition
# look like? {{ len(starts) }} one-word prompts, {{ ROWS }} continuations each (rows of one
# batch, one generator seeded {{ SEED }} for each way of choosing): how many of the
# {{ ROWS * len(starts) }} texts differ, how many write one piece twice in a row, how many
# repeat a run of three pieces inside themselves, and how many hold greedy's most common run
# of three pieces?


# %% tags=["nbval-ignore-output"]
def runs(text, n=3):                                                 # every run of n pieces
    pieces = data.vocab.pieces(text)
    return [tuple(pieces[i:i + n]) for i in range(len(pieces) - n + 1)]


def stutters(text):                                                  # one piece twice in a row
    return any(a == b for a, b in runs(text, 2))


def repeats_itself(text, n=3):
    return len(set(runs(text, n))) < len(runs(text, n))


ROWS = 3                                                             # continuations per prompt
starts = ["I", "Tom", "She", "We", "Where", "Why", "Can", "The", "My", "It"]
written = {}
for name, setting in settings.items():
    generator = torch.Generator().manual_seed(SEED)
    texts = []
    for start in starts:
        ids = torch.tensor([[BOS_ID, *data.vocab.encode(start)]] * ROWS)     # (ROWS, T0)
        out = lm.generate(model, ids, max_new_tokens=30, generator=generator,
                          **setting)                                # (ROWS, T0 + n)
        texts += [data.vocab.decode(row) for row in out]
    written[name] = texts
greedy_texts = written["greedy"][::ROWS]                             # one text per prompt
in_texts = Counter(run for text in greedy_texts for run in set(runs(text)))  # run -> texts
[(common, common_in)] = in_texts.most_common(1)
common_run = "".join(common).replace("▁", " ").strip()
print(f"greedy's most common run of three pieces: {common_run!r}, in {common_in} of its "
      f"{len(greedy_texts)} texts\n")
counts = {name: dict(different=len(set(texts)), stutter=sum(map(stutters, texts)),
                     repeat=sum(map(repeats_itself, texts)),
                     common=sum(common in runs(text) for text in texts))
          for name, texts in written.items()}
print(f"{'of ' + str(ROWS * len(starts)) + ' texts':10}  different  stutter  repeat a run  "
      f"hold {common_run!r}")
for name, c in counts.items():
    print(f"{name:10}  {c['different']:>9}  {c['stutter']:>7}  {c['repeat']:>12}  {c['common']:>6}"
          f"   e.g. {written[name][ROWS]!r}")
stuttering = [text for text in greedy_texts if stutters(text)]
stutter_examples = "; ".join(f'"{text}"' for text in stuttering) or "none"
sampled = [c for name, c in counts.items() if name != "greedy"]     # the four samplers'


def span(values):                                                    # "2 to 5", or "3" if all equal
    values = list(values)
    low, high = min(values), max(values)
    return f"{low}" if low == high else f"{low} to {high}"


same_sampled = sum(a == b for a, b in zip(written["τ = 1"], written["top-p 0.9"]))
print("\ngreedy's texts:", " | ".join(greedy_texts))
print(f"τ = 1 and top-p 0.9 write the same text in {same_sampled} of {ROWS * len(starts)}")

# %% [markdown]
# Greedy draws nothing, so its {{ ROWS }} continuations of a prompt are one text: at most
# {{ len(starts) }} of {{ ROWS * len(starts) }} differ. Its repetition shows *across* prompts:
# "{{ common_run }}" is in {{ common_in }} of its {{ len(greedy_texts) }} texts. Inside one
# text: in {{ len(stuttering) }} of its {{ len(greedy_texts) }} texts one piece is written twice
# in a row ({{ stutter_examples }}), and a run of three pieces repeats in
# {{ counts["greedy"]["repeat"] }} of greedy's {{ ROWS * len(starts) }} texts and in
# {{ span(c["repeat"] for c in sampled) }} of each sampler's. The samplers' texts hold greedy's
# common run {{ span(c["common"] for c in sampled) }} times in {{ ROWS * len(starts) }}, greedy's
# {{ counts["greedy"]["common"] }}: each draw can leave the most common phrase. The samplers
# write one piece twice in a row {{ span(c["stutter"] for c in sampled) }} times in
# {{ ROWS * len(starts) }} each (the table's "stutter" column). (τ = 1 and top-p 0.9 write the same text in
# {{ same_sampled }} of the {{ ROWS * len(starts) }} cases: each setting draws its
# {{ len(starts) }} prompts' continuations from one generator seeded {{ SEED }}, so the two
# share their random numbers only until their batches run for different numbers of steps.)
#
# Which way of choosing to use depends on the task: greedy or beam search (lesson 09) where
# one best output is wanted (translation, though a sentence has several right ones, lesson
# 11), top-p or a temperature below 1 for free text.
#
# ## 7. The KV cache, again
#
# Each step of `generate` needs the keys and values of every earlier position, in every
# layer. Recomputing them runs the whole prefix through the model at every step; lesson
# 10's **KV cache** keeps them and feeds only the newest token: `course.lm.lm_step` is
# lesson 10's cached step in each layer, with the new key rotated by its position. Both
# must write the same tokens; `generation_speedup` checks that, then times greedy
# generation for {{ kv_prompt.shape[0] }} sequences both ways (the best of {{ REPEATS }} runs
# each), at three lengths:

# %% tags=["nbval-ignore-output"]
kv_prompt = torch.full((8, 1), BOS_ID)                           # (B, 1): <bos> only
REPEATS = 5
timings = {}
for n_tokens in (10, 30, 60):
    timings[n_tokens] = timing = lm.generation_speedup(model, kv_prompt, n_tokens, REPEATS)
    print(f"{n_tokens:>2} tokens x {timing['batch']} sequences: recomputing "
          f"{timing['recompute_s']:.2f} s, cached {timing['cached_s']:.2f} s: "
          f"{timing['speedup']:.1f} times faster")
print("the gain at 60 tokens above the gain at 10:", timings[60]["speedup"] > timings[10]["speedup"])

# %% [markdown]
# Recomputing step $t$ runs $t$ positions through every layer, so writing $n$ tokens costs
# about $n^2/2$ position-passes against the cache's $n$; the cache's steps are small,
# though, and each pays a fixed cost of Python and PyTorch calls, which is why the measured
# gain is smaller than $n/2$ ({{ timings[60]["speedup"]:.1f }} times at $n = 60$, against 30).
# Here it is {{ timings[10]["speedup"]:.1f }} times at 10 tokens,
# {{ timings[30]["speedup"]:.1f }} at 30 and {{ timings[60]["speedup"]:.1f }} at 60: larger at
# 60 than at 10 (the check above); on a busy machine neighbouring lengths can come out in
# either order. Lesson 11's greedy decoding, and `translate`'s beam search there, keep such a
# cache too, the encoder-decoder kind of `course.efficient` (the decoder's own keys and
# values, plus the cross-attention's keys and values of the source, computed once; no
# rotation, its positions are added to the embeddings); lesson 11's scored beam search
# recomputes the prefix. The servers that run large language models keep one as well
# (lesson 10, section 2).
#
# ## 8. Back to lesson 11, and the three families
#
# Apart from the three choices of section 2 (lesson 11's models are post-LN and add
# sinusoidal positions to their embeddings; `fra-eng` has two word vocabularies and ties
# nothing, while `fra-eng-full` shares one BPE vocabulary and ties its embeddings as this
# model does), the translator
# of lesson 11 is this model with two things added: an **encoder** that reads
# the French sentence, and in every decoder layer a **cross-attention** sub-layer whose
# queries come from the English being written and whose keys and values come from the
# encoder's output. Remove the cross-attention from a decoder layer and what remains is an
# encoder layer used under a causal mask. In parameters, at this model's size:

# %%
d_model, n_heads, d_ff = config["d_model"], config["n_heads"], config["d_ff"]
decoder_layer = DecoderLayer(d_model, n_heads, d_ff, norm_first=True)
encoder_layer = EncoderLayer(d_model, n_heads, d_ff, norm_first=True)
count = lambda module: sum(p.numel() for p in module.parameters())  # noqa: E731
print(f"a decoder layer of this size:        {count(decoder_layer):>8,}")
print(f"this lesson's layer (encoder layer): {count(encoder_layer):>8,}")
print(f"difference:                          {count(decoder_layer) - count(encoder_layer):>8,}"
      f"  = cross-attention {count(decoder_layer.cross_attn):,} + its LayerNorm "
      f"{count(decoder_layer.norm3):,}")

# %% [markdown]
# The same layers make three families of models, which differ in who may attend to whom
# and in what they are trained to predict:
#
# | family | attention | trained to | what it is used for | a well-known member |
# |---|---|---|---|---|
# | encoder-only | every token sees every other (only padding is hidden) | recover tokens that were masked out of the input | a vector per token that depends on the whole text: classifying, tagging, search | BERT (Devlin et al. 2019) |
# | decoder-only | causal: a token sees only those before it | predict the next token | writing text; with a prompt, many tasks posed as "continue this" | GPT (Radford et al. 2018), GPT-2, GPT-3; this lesson's model |
# | encoder-decoder | encoder: all to all; decoder: causal, plus cross-attention to the encoder | write an output sequence given an input sequence | translation, summarisation, any text-to-text task | the original Transformer (Vaswani et al. 2017, lessons 08-11); T5 (Raffel et al. 2020) |
#
# A decoder-only model can translate too, if it is given "French: ... English:" and trained
# on text that continues it that way; it then reads the source with causal attention
# instead of an encoder that sees it whole.
#
# ## 9. The command line
#
# The {{ STEPS }} steps above are a demonstration. The command line trains the same model for
# {{ config["time_budget"]:.0f }} seconds (with a warm-up of the learning rate), measures its
# held-out perplexity beside the two baselines, and saves a checkpoint that
# `python -m course.generate` continues prompts with:
#
# ```bash
# python -m course.train --task lm-en            # ten minutes; writes runs/lm-en/checkpoint.pt
# python -m course.generate --prompt "I am" --top-p 0.9 --seed 0 --samples 4
# python -m course.generate --prompt "Tom" --temperature 0   # greedy
# ```
#
# Measured with `python -m course.train --task lm-en --seed S` on the course's two-core
# machine (one torch thread, `CONFIGS["lm-en"]`), other work running beside each run (load
# average 1.6 to 3.0): command-line runs, not this notebook's. Each seed draws its own
# held-out split, so each has its own baselines:
#
# | seed | steps in 600 s | perplexity | bigram | unigram |
# |---|---|---|---|---|
# | 0 | 2,750 | 26.7 | 38.8 | 329.4 |
# | 1 | 2,315 | 28.4 | 37.7 | 319.8 |
# | 2 | 3,084 | 26.0 | 37.6 | 321.2 |
# | mean (range) | 2,716 (2,315–3,084) | 27.0 (26.0–28.4) | 38.0 (37.6–38.8) | 323.5 (319.8–329.4) |
#
# Every seed ends 25% to 31% below its bigram. Seed 0's checkpoint (of that command-line run)
# continues prompts so:
#
# ```text
# $ python -m course.generate --prompt "I am" --top-p 0.9 --seed 0 --samples 4
# I am going to shut the window open.
# I am not sure about it.
# I am the only one who to tell you something you are saying.
# I am not telling you a lie.
# $ python -m course.generate --prompt "Tom" --temperature 0
# Tom is a good man.
# ```
#
# Mostly English, sometimes not ("the only one who to tell you"). A model that writes long,
# coherent text needs far more of everything: GPT-2's smallest model (Radford et al. 2019; 124 million parameters in
# its released weights) has about {{ 124e6 / n_params:.0f }} times these {{ n_params:, }}, and
# read millions of web pages.
