# %% [markdown]
# # 02 · Dot-product attention
#
# **The idea.** Attention is a *soft dictionary lookup*. A query is compared with every
# key; the better a key matches, the more of its value goes into the answer.
#
# In this lesson you will
# 1. do one lookup by hand, number by number;
# 2. see why the result is a *contextual* embedding: the same word "it" gets a different
#    vector in a different sentence;
# 3. write `dot_product_attention(q, k, v)` yourself, and have it checked.
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
fig, axes = plt.subplots(1, 2, figsize=(8, 2.5))
axes[0].bar(["key 0", "key 1", "key 2"], scores)
axes[0].set_title("scores  q · k")
axes[1].bar(["key 0", "key 1", "key 2"], weights, color="tab:orange")
axes[1].set_title("weights  softmax(scores)")
axes[1].set_ylim(0, 1)
plt.tight_layout()
plt.show()

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
# says "it" is?* We write that query by hand: the "noun" feature plus the adjective's
# feature, sharpened by a factor of 3. (In lesson 03 a network *learns* matrices that make
# queries like this one from data.)
#
# Keys and values are the word embeddings themselves.

# %%
def contextual_it(last_word):
    words = sentence(last_word)
    E = torch.stack([embedding[w] for w in words])                # (T, 7): static embeddings
    query = 3.0 * (embedding["it"] + embedding[last_word])         # (7,): the question "it" asks
    weights = (E @ query).softmax(dim=0)                           # (T,): one weight per word
    return words, weights, weights @ E                             # contextual "it": (7,)


fig, axes = plt.subplots(1, 2, figsize=(11, 2.8), sharey=True)
for ax, last_word in zip(axes, ["tired", "wide"]):
    words, weights, _ = contextual_it(last_word)
    ax.bar(range(len(words)), weights)
    ax.set_xticks(range(len(words)), words, rotation=60)
    ax.set_title(f'where "it" looks: ...too {last_word}')
axes[0].set_ylabel("attention weight")
plt.tight_layout()
plt.show()

# %% [markdown]
# The static "it" is identical in both sentences; the contextual one moves toward the
# chicken in the first and toward the road in the second. Cosine similarity measures it:

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
# - `output = weights v`, shape `(..., T_q, d_v)`.
#
# No scaling yet: that is lesson 03. Hints: `k.transpose(-2, -1)` swaps the last two axes
# whatever the batch axes are; `tensor.softmax(dim=-1)` normalises along the last axis.

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
attention_heatmap(weights[0], queries=words, keys=words,
                  title="self-attention with Q = K = V = static embeddings")
plt.show()

# %% [markdown]
# Each word mostly looks at words *like itself*: the function words at each other, and
# "it" spreads its weight over all nouns. With $Q = K$ a word can only ask "who resembles
# me?". To ask a *different* question, such as "which noun can be tired?", queries and keys
# need their own learned projections, $Q = X W_Q$ and $K = X W_K$.
#
# ## What's next
# Lesson 03 adds those learned projections and fixes a problem you can't see at $d_k = 7$:
# as $d_k$ grows, dot products grow, the softmax saturates and gradients vanish. The cure
# is a single division by $\sqrt{d_k}$.
