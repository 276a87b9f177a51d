# %% [markdown]
# # 02 · Dot-product attention
#
# **The idea.** Attention is a *soft dictionary lookup*. A query is compared with every
# key; the better a key matches, the more of its value goes into the answer.
#
# In this lesson you will
# 1. read lesson 01's additive attention as such a lookup, and see why the Transformer
#    scores with a plain dot product instead;
# 2. do one lookup by hand, number by number, and see why libraries compute the softmax
#    with the row's maximum subtracted first;
# 3. see why the result is a *contextual* embedding: the same word "it" gets a different
#    vector in a different sentence;
# 4. write `dot_product_attention(q, k, v)` yourself, and have it checked.
#
# Lesson 01 showed why a recurrent network struggles to carry information across a long
# sequence. Attention lets every position look at every other position directly, in one step.

# %%
import matplotlib.pyplot as plt
import torch

from course import check
from course.plotting import attention_heatmap
from course.utils import seed_everything

seed_everything(0)
torch.set_printoptions(precision=3, sci_mode=False)

# %% [markdown]
# ## 1. From a hard lookup to a soft one
#
# A Python `dict` is a *hard* lookup: the query must equal a key exactly, and you get
# exactly one value back.

# %%
capitals = {"France": "Paris", "Japan": "Tokyo", "Kenya": "Nairobi"}
capitals["Japan"]

# %% [markdown]
# Now let keys, queries and values be **vectors**. No key will equal the query exactly, so
# instead we ask *how similar* the query $q$ is to each key $k_i$, turn the similarities into
# weights that are positive and sum to 1, and return the weighted average of the values:
#
# $$
# s_i = q \cdot k_i, \qquad
# \alpha_i = \operatorname{softmax}(s)_i = \frac{e^{s_i}}{\sum_j e^{s_j}}, \qquad
# \text{output} = \sum_i \alpha_i \, v_i .
# $$
#
# The dot product is large when two vectors point the same way. The softmax makes the
# largest score win the most weight, without making the choice all-or-nothing, which
# keeps everything differentiable so a network can *learn* what to look up.

# %% [markdown]
# ### You have met this lookup before: lesson 01's attention
#
# At each output step, lesson 01's decoder looked back at all the encoder's states. In the
# words of this lesson:
#
# | lesson 01's decoder attention | this lesson |
# |---|---|
# | the decoder's state at the current output step | the query $q$ |
# | the encoder's states $h_1, \dots, h_T$, one per source position | the keys $k_i$, **and** the values $v_i$ |
# | one weight per source position, summing to 1 | $\alpha = \operatorname{softmax}(s)$ |
# | the weighted average of the encoder's states | the output $\sum_i \alpha_i v_i$ |
#
# Keys and values were the same vectors there. Only the **score** differs. Lesson 01 used
# *additive* attention (Bahdanau et al., 2015): a small network with one hidden layer of
# tanh units scores each pair,
#
# $$
# s_i^{\text{additive}} = v_a^\top \tanh\left(W_a\, q + U_a\, k_i\right),
# \qquad\text{here:}\qquad s_i = q \cdot k_i ,
# $$
#
# with learned $W_a$, $U_a$ and $v_a$ (Bahdanau's names; $v_a$ is a weight vector, not a
# value; lesson 01's module also adds a bias $b_a$ inside the tanh, left out here). Both,
# computed for every query against every key:

# %%
T_q, T_k, d = 200, 200, 64
generator = torch.Generator().manual_seed(0)
Q_demo = torch.randn(T_q, d, generator=generator)              # (T_q, d): one query per output step
K_demo = torch.randn(T_k, d, generator=generator)              # (T_k, d): one key per source position
W_a = torch.randn(d, d, generator=generator) / d**0.5          # (d, d)
U_a = torch.randn(d, d, generator=generator) / d**0.5          # (d, d)
v_a = torch.randn(d, generator=generator) / d**0.5             # (d,)


def additive_scores(Q, K):
    hidden = torch.tanh((Q @ W_a.T)[:, None, :]                # (T_q, 1, d)
                        + (K @ U_a.T)[None, :, :])             # + (1, T_k, d) -> (T_q, T_k, d)
    return hidden @ v_a, hidden                                # (T_q, T_k), and the hidden layer


def dot_scores(Q, K):
    return Q @ K.T                                             # (T_q, d) @ (d, T_k) -> (T_q, T_k)


scores_additive, hidden = additive_scores(Q_demo, K_demo)
scores_dot = dot_scores(Q_demo, K_demo)
print("additive: scores", tuple(scores_additive.shape), "via a hidden layer", tuple(hidden.shape),
      f"= {hidden.numel():,} numbers")
print("dot:      scores", tuple(scores_dot.shape), "straight from one matrix multiplication")

# %% [markdown]
# The same two on the clock, each the best of 20 runs on one CPU thread, so both get the
# same hardware (the milliseconds depend on the CPU; the gap is what matters):

# %% tags=["nbval-ignore-output"]
from course.utils import best_seconds, use_threads  # the fastest of `repeats` calls

with use_threads(1):                          # one thread, then the notebook's count back
    seconds_additive = best_seconds(additive_scores, Q_demo, K_demo, repeats=20)
    seconds_dot = best_seconds(dot_scores, Q_demo, K_demo, repeats=20)
print(f"additive {seconds_additive * 1e3:.3f} ms, dot product {seconds_dot * 1e3:.3f} ms: "
      f"the dot product is {seconds_additive / seconds_dot:.0f}x faster")

# %% [markdown]
# The Transformer paper (Vaswani et al., 2017, §3.2.1) weighs exactly these two. On paper
# they cost about the same: both do a few operations per (query, key, dimension). In
# practice the dot product wins by far, in time and in memory, because the whole score
# matrix is **one matrix multiplication**, the operation that hardware and libraries are
# best at; the additive score must build and squash a $d$-wide hidden vector for every
# (query, key) pair first, the {{ hidden.numel() / 1e6:.2f }} million numbers above for a mere
# {{ scores_dot.numel():, }} scores.
#
# The paper also notes a catch, citing Britz et al. (2017): for large $d_k$, additive
# attention gives better results than the dot product *without scaling*. The cause the paper
# suspects: dot products of long vectors grow large, and large scores push the softmax into a
# corner where it barely passes back any gradient. Lesson 03 measures exactly that and fixes
# it with one division by $\sqrt{d_k}$, which keeps the dot product's speed. The lookups of
# this lesson use $d_k = 2$ and $d_k = 7$, small enough to leave the scores unscaled (the
# 64-wide scores above were only timed, never put through a softmax; the 1024-wide ones of
# section 2's aside are left unscaled on purpose, to show the overflow).

# %% [markdown]
# ## 2. One lookup, by hand
#
# Three keys in two dimensions, three values, one query. The query points almost the same
# way as key 1.

# %%
keys = torch.tensor([[1.0, 0.0],    # key 0 points right
                     [0.0, 1.0],    # key 1 points up
                     [-1.0, 0.0]])  # key 2 points left
values = torch.tensor([[10.0, 0.0],
                       [0.0, 10.0],
                       [5.0, 5.0]])
query = torch.tensor([0.3, 2.0])   # mostly "up"

# %% [markdown]
# **Step 1: scores.** One dot product per key.

# %%
scores = keys @ query          # (3, 2) @ (2,) -> (3,)
scores

# %% [markdown]
# **Step 2: weights.** A softmax turns the scores into a probability distribution.

# %%
weights = scores.exp() / scores.exp().sum()   # the softmax, written out
print("weights:", weights, " sum:", weights.sum().item())
print("same as torch.softmax:", torch.allclose(weights, scores.softmax(dim=0)))

# %% [markdown]
# **Step 3: the answer.** The weighted average of the values. It sits close to value 1,
# the value of the best-matching key, with a little of the others mixed in.

# %%
output = weights @ values      # (3,) @ (3, 2) -> (2,)
output

# %%
fig, axes = plt.subplots(1, 2, figsize=(8, 2.8))
axes[0].bar(["key 0", "key 1", "key 2"], scores)
axes[0].set_title("scores  q · k")
axes[0].set_ylabel("score")
axes[1].bar(["key 0", "key 1", "key 2"], weights, color="tab:orange")
axes[1].set_title("weights  softmax(scores)")
axes[1].set_ylabel("attention weight")
axes[1].set_ylim(0, 1)
for ax in axes:
    ax.set_xlabel("key")
plt.tight_layout()
plt.show()

# %% [markdown]
# ### Aside: the softmax that libraries actually compute
#
# `exp / sum` is the softmax's definition, and it is fine for the small scores of this lesson's lookups.
# But $e^{s}$ grows fast, and a float32 holds at most about $3.4 \times 10^{38}$, which is
# $e^{88.7}$. One score past that and `exp` returns `inf`:

# %%
largest = torch.finfo(torch.float32).max
print(f"largest float32: {largest:.3g} = exp({torch.tensor(largest).log().item():.2f})")
for x in [88.0, 88.7, 88.8, 300.0]:
    print(f"exp({x}) = {torch.tensor(x).exp().item():.3g}")

# %% [markdown]
# The fix is free, because the softmax does not change when the same number $c$ is
# subtracted from every score:
#
# $$
# \operatorname{softmax}(s - c)_i = \frac{e^{s_i - c}}{\sum_j e^{s_j - c}}
# = \frac{e^{-c}\, e^{s_i}}{e^{-c} \sum_j e^{s_j}} = \operatorname{softmax}(s)_i .
# $$
#
# Take $c = \max_j s_j$. Then every exponent is $\le 0$, so no `exp` exceeds 1 and none can
# overflow; and the largest one is exactly $e^0 = 1$, so the sum is at least 1 and never 0.

# %%
def softmax_naive(s):
    return s.exp() / s.exp().sum(dim=-1, keepdim=True)


def softmax_stable(s):
    shifted = s - s.max(dim=-1, keepdim=True).values    # same shape; the row's largest is now 0
    return shifted.exp() / shifted.exp().sum(dim=-1, keepdim=True)


large_scores = 100 * scores                             # step 1's scores, 100 times larger
for name, row in [("small row", scores), ("large row", large_scores)]:
    print(f"{name} {row}")
    print(f"   exp / sum:        {softmax_naive(row)}")
    print(f"   max subtracted:   {softmax_stable(row)}")
    print(f"   torch.softmax:    {row.softmax(dim=0)}")

# %% [markdown]
# On the small row all three agree. On the large row $e^{200}$ overflows, the sum is `inf`,
# and $\infty / \infty$ is NaN; the stable version, like `torch.softmax`, which subtracts
# the maximum internally, gives the right answer: all the weight on key 1.
#
# Do scores this large happen? They do as soon as vectors are wide and unscaled, which is
# lesson 03's subject. A taste: random queries and keys with unit-variance entries, at
# $d_k = 1024$, 8 keys per query.

# %%
q_wide = torch.randn(1000, 1, 1024, generator=torch.Generator().manual_seed(0))   # (n, 1, d_k)
k_wide = torch.randn(1000, 8, 1024, generator=torch.Generator().manual_seed(1))   # (n, T_k=8, d_k)
wide_scores = (q_wide @ k_wide.transpose(-2, -1)).squeeze(1)                     # (n, 8)
nan_rows = softmax_naive(wide_scores).isnan().any(dim=-1).sum().item()           # exp / sum
print(f"largest score: {wide_scores.max().item():.0f}")
print("rows that come out NaN:  exp / sum", nan_rows,
      "of 1000;  max subtracted", softmax_stable(wide_scores).isnan().any(dim=-1).sum().item())

# %% [markdown]
# {{ nan_rows }} rows in 1000 would be NaN with `exp / sum`, and a NaN spreads into
# everything computed from it. The scaling of lesson 03 makes such scores rare, but a
# softmax should not depend on that: from lesson 03 on, compute it with the maximum
# subtracted (or let `tensor.softmax` do it).

# %% [markdown]
# ## 3. All queries at once: matrices
#
# Stack the queries as the rows of $Q$, keys as the rows of $K$, values as the rows of $V$.
# Every score is then one entry of a matrix product, and the whole lookup is
#
# $$
# \operatorname{Attention}(Q, K, V) = \operatorname{softmax}\!\left(Q K^\top\right) V ,
# $$
#
# with the softmax taken **along each row**, i.e. over the keys.
#
# | tensor | shape | meaning |
# |---|---|---|
# | $Q$ | $(T_q, d_k)$ | one query per position asking |
# | $K$ | $(T_k, d_k)$ | one key per position that can be found |
# | $V$ | $(T_k, d_v)$ | what each of those positions hands over |
# | $QK^\top$ | $(T_q, T_k)$ | every query against every key |
# | output | $(T_q, d_v)$ | one answer per query |
#
# Queries and keys must share a width $d_k$ (they are dot-multiplied); values can have
# another width $d_v$. With a batch of sequences, every tensor gets a leading batch axis `B`.

# %% [markdown]
# ## 4. Static vs contextual embeddings: what does "it" mean?
#
# > *The chicken didn't cross the road because **it** was too **tired**.*
# > *The chicken didn't cross the road because **it** was too **wide**.*
#
# A word-embedding table gives "it" the same vector in both sentences: a *static* embedding.
# But "it" is the chicken in one and the road in the other. Attention can fix that: the new
# vector for "it" is a weighted average over the *sentence*, so it depends on the context.
#
# To see it plainly we build tiny embeddings by hand, one readable feature per dimension.

# %%
features = ["noun", "animal", "place", "can be tired", "can be wide", "action", "function word"]
embedding = {
    "the":     [0, 0, 0, 0, 0, 0, 1],
    "chicken": [1, 1, 0, 1, 0, 0, 0],
    "did":     [0, 0, 0, 0, 0, 0, 1],
    "not":     [0, 0, 0, 0, 0, 0, 1],
    "cross":   [0, 0, 0, 0, 0, 1, 0],
    "road":    [1, 0, 1, 0, 1, 0, 0],
    "because": [0, 0, 0, 0, 0, 0, 1],
    "it":      [1, 0, 0, 0, 0, 0, 0],
    "was":     [0, 0, 0, 0, 0, 0, 1],
    "too":     [0, 0, 0, 0, 0, 0, 1],
    "tired":   [0, 0, 0, 1, 0, 0, 0],
    "wide":    [0, 0, 0, 0, 1, 0, 0],
}
embedding = {word: torch.tensor(vector, dtype=torch.float) for word, vector in embedding.items()}


def sentence(last_word):
    return f"the chicken did not cross the road because it was too {last_word}".split()


# %% [markdown]
# What should "it" ask? Roughly: *which noun in this sentence could be what the sentence
# says "it" is?* We write that query by hand, and it is built from **two** words' vectors:
# the embedding of "it" (its "noun" feature) **plus the embedding of the sentence's last
# word**, "tired" or "wide", sharpened by a factor of 3.
#
# Why the adjective? Because the vector of "it" alone cannot do it: it is the same in both
# sentences, so a query made from it alone asks the same question in both and puts the same
# weights on the two nouns (checked right after the plot). What decides between them is the
# adjective, so the adjective has to reach the query. Here we put it there by hand. A trained
# Transformer gets it there by itself: an earlier attention layer mixes "tired" into the
# vector at "it", or, as in lesson 03, the adjective's own position learns to ask the
# question.
#
# Keys and values are the word embeddings themselves.

# %%
def contextual_it(last_word):
    words = sentence(last_word)
    E = torch.stack([embedding[w] for w in words])                # (T, 7): static embeddings
    query = 3.0 * (embedding["it"] + embedding[last_word])         # (7,): "it" plus the adjective
    weights = (E @ query).softmax(dim=0)                           # (T,): one weight per word
    return words, weights, weights @ E                             # contextual "it": (7,)


fig, axes = plt.subplots(1, 2, figsize=(11, 3.2), sharey=True)
for ax, last_word in zip(axes, ["tired", "wide"]):
    words, weights, _ = contextual_it(last_word)
    ax.bar(range(len(words)), weights)
    ax.set_xticks(range(len(words)), words, rotation=60)
    ax.set_title(f'...too {last_word}: weights of the query "it" + "{last_word}"')
    ax.set_xlabel("key (word in the sentence)")
    ax.set_ylabel("attention weight")
plt.tight_layout()
plt.show()

# %% [markdown]
# And the query made from "it" alone, the same in both sentences:

# %%
for last_word in ["tired", "wide"]:
    words = sentence(last_word)
    E = torch.stack([embedding[w] for w in words])                # (T, 7)
    weights = (E @ (3.0 * embedding["it"])).softmax(dim=0)         # (T,)
    print(f"...too {last_word:5}: weight on chicken {weights[words.index('chicken')]:.2f}, "
          f"on road {weights[words.index('road')]:.2f}")

# %% [markdown]
# Alone, "it" cannot choose between the two nouns. With the adjective in its query, the
# contextual "it" moves toward the chicken in the first sentence and toward the road in the
# second, while the static "it" stays where it was. Cosine similarity measures it:

# %%
def cosine(a, b):
    return torch.nn.functional.cosine_similarity(a, b, dim=0).item()


for last_word in ["tired", "wide"]:
    _, _, it_vector = contextual_it(last_word)
    print(f"...too {last_word:5}: static 'it' vs chicken {cosine(embedding['it'], embedding['chicken']):.2f}, "
          f"vs road {cosine(embedding['it'], embedding['road']):.2f}  |  "
          f"contextual 'it' vs chicken {cosine(it_vector, embedding['chicken']):.2f}, "
          f"vs road {cosine(it_vector, embedding['road']):.2f}")

# %% [markdown]
# ## 5. Exercise: write `dot_product_attention`
#
# Write `dot_product_attention(q, k, v)` returning the pair `(output, weights)`:
#
# - `q` has shape `(..., T_q, d_k)`, `k` `(..., T_k, d_k)`, `v` `(..., T_k, d_v)`; the `...`
#   is any number of batch axes (none, `B`, or `B, h` later on);
# - `weights = softmax(q kᵀ)` over the **keys**, shape `(..., T_q, T_k)`;
# - `output = weights v`, shape `(..., T_q, d_v)`;
# - both keep the inputs' dtype: float32 in, float32 out; float64 in, float64 out (the
#   checker tries both). Operations on the inputs keep it by themselves; a new tensor made
#   with its own dtype, or a `.double()` / `.float()`, would change it.
#
# No scaling yet: that is lesson 03. Hints: `k.transpose(-2, -1)` swaps the last two axes
# whatever the batch axes are; `tensor.softmax(dim=-1)` normalises along the last axis.
# Writing the softmax out as `exp / sum` is accepted here, where the scores are small;
# lesson 03's checker tries scores large enough to overflow it, so there use
# `tensor.softmax` or subtract the row's maximum first (section 2's aside).

# %%
def dot_product_attention(q, k, v):
    ### BEGIN SOLUTION
    scores = q @ k.transpose(-2, -1)       # (..., T_q, T_k)
    weights = scores.softmax(dim=-1)       # each query's weights sum to 1 over the keys
    output = weights @ v                   # (..., T_q, d_v)
    return output, weights
    ### END SOLUTION


# %% [markdown]
# Run the checker. It tries your function on one sequence and on batches, compares it with
# the reference, and if something is off it tells you *what*.

# %%
check.dot_product_attention(dot_product_attention)

# %% [markdown]
# ## 6. Self-attention over a whole sentence
#
# From here on we use the course's reference version, `course.attention.dot_product_attention`,
# so the rest of the notebook runs even if your exercise is not finished yet.
#
# In *self*-attention the queries, keys and values all come from the same sentence: every
# word looks at every word. Here we use the static embeddings directly as $Q$, $K$ and $V$.

# %%
from course.attention import dot_product_attention as reference_attention

words = sentence("tired")
E = torch.stack([embedding[w] for w in words]).unsqueeze(0)   # (B=1, T=12, 7)
output, weights = reference_attention(E, E, E)                 # (1, 12, 7), (1, 12, 12)
print("output", tuple(output.shape), " weights", tuple(weights.shape))

# %%
ax = attention_heatmap(weights[0], queries=words, keys=words,
                       title="self-attention with Q = K = V = static embeddings")
ax.images[0].colorbar.set_label("attention weight")
plt.show()

# %% [markdown]
# The numbers behind a few rows of the heatmap:

# %%
self_weights = weights[0]                                                # (T, T): the heatmap
is_function_word = torch.tensor([embedding[w][-1] == 1 for w in words])  # (T,): the, did, not, ...
on_function_words = self_weights[is_function_word][:, is_function_word].sum(dim=-1)   # (7,): "the" twice
print(f"each function word, on the function words together: at least {on_function_words.min():.2f}")


def weight_of(query, key):
    """The weight the word `query` puts on the word `key`."""
    return self_weights[words.index(query), words.index(key)].item()


def largest_elsewhere(query, *keys):
    """The largest weight `query` puts on any word other than itself and `keys`."""
    others = [j for j, w in enumerate(words) if w not in (query, *keys)]
    return self_weights[words.index(query), others].max().item()


for word in ["chicken", "road", "cross"]:
    print(f"{word:>8}: {weight_of(word, word):.2f} on itself, "
          f"at most {largest_elsewhere(word):.2f} on any other word")
print(f"      it: {weight_of('it', 'it'):.2f} on itself, {weight_of('it', 'chicken'):.2f} on chicken, "
      f"{weight_of('it', 'road'):.2f} on road, at most {largest_elsewhere('it', 'chicken', 'road'):.2f} "
      "on any other word")

# %% [markdown]
# Words look most at words *like themselves*: each function word puts at least
# {{ on_function_words.min():.2f }} of its weight on the function words, and "chicken" and
# "road" put {{ weight_of("chicken", "chicken"):.2f }} and {{ weight_of("road", "road"):.2f }}
# on themselves. "it" shares its one feature, "noun", with "chicken" and "road": it gives them
# and itself the same weight, {{ weight_of("it", "chicken"):.2f }} each, and has no way to
# prefer one noun. A word that shares no feature with any other, like "cross", keeps
# {{ weight_of("cross", "cross"):.2f }} on itself and spreads the rest evenly, at most
# {{ largest_elsewhere("cross"):.2f }} on any other word (every other word's score is 0). With $Q = K$ a word can only ask "who
# resembles me?". To ask a *different* question, such as "which noun can be tired?", queries and keys
# need their own learned projections, $Q = X W_Q$ and $K = X W_K$.
#
# ## What's next
# Lesson 03 adds those learned projections and fixes a problem you can't see at $d_k = 7$:
# as $d_k$ grows, dot products grow, the softmax saturates and most queries get almost no
# gradient back through it. The cure is a single division by $\sqrt{d_k}$.
