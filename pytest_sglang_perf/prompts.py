"""Fixed prompts for performance tests. Never edit one in place: its hash keys the stored baselines."""

from __future__ import annotations

RED_BLACK_TREE = (
    "Write a Python function that implements a red-black tree with insert, delete, and search operations. "
    "Include detailed comments."
)
"""The engineer's coding prompt, exactly as sent (use with max_tokens=512, temperature=0.6)."""

SHORT_FACTUAL = "What is the capital of Australia? Answer in one sentence."
"""A short factual question: a tiny prompt, a short answer; TTFT-dominated."""

_INCIDENT_REPORT = """\
Post-incident review: checkout latency regression, week 37

Summary. For roughly nine hours on Tuesday, the p99 latency of the checkout service rose from 180 ms to
1.4 s. Error rates stayed below the paging threshold, so the on-call engineer was alerted only when a
merchant opened a support ticket. No orders were lost, but about 2.3% of sessions abandoned the cart
during the window, compared with 0.9% on a normal Tuesday.

Timeline. At 08:12 a configuration change enabled a new fraud-scoring rule set. The rule set was tested
in staging with a synthetic load of 200 requests per second, a tenth of production traffic. At 08:40 the
connection pool to the scoring service began to saturate; requests queued inside the client library,
which retried timed-out calls with no backoff. By 09:30 the retry traffic alone exceeded the original
request rate. Dashboards showed the scoring service as healthy because its own latency, measured on the
server side, never exceeded 60 ms: the time was spent waiting for a connection, not being served. At
16:55 a support ticket reached the on-call engineer, who correlated the start of the regression with the
rule-set deployment and rolled it back at 17:20. Latency returned to normal within four minutes.

Root cause. The new rules called an external address-verification API synchronously for one order in
five. That API answers in 300-900 ms. The scoring client held a pooled connection for the whole call, so
the effective pool capacity fell by a factor of roughly six. The client retried any call slower than
500 ms, which turned slow answers into additional load on an already exhausted pool.

Contributing factors. First, the staging load test used a tenth of production traffic and a warm cache,
so pool exhaustion never appeared there. Second, latency alerts were defined on the server-side
histogram of the scoring service rather than on the client-observed latency of checkout, which hid the
queueing. Third, the retry policy had been copied from a batch job where aggressive retries were
harmless. Fourth, the deployment was not staged: the rule set went to every region at once.

What went well. Rollback was a single command and took effect in minutes. The order pipeline's
idempotency keys prevented duplicate charges despite the retries. Merchant support escalated quickly
once the pattern was recognised.

Action items. (1) Alert on client-observed p99 latency for every synchronous dependency of checkout,
owned by the checkout team, due in two weeks. (2) Replace the retry policy with capped exponential backoff
and a retry budget of 10% of requests, due in one week. (3) Make the address-verification call
asynchronous and move it after order confirmation, due next quarter. (4) Require load tests at full
production rate with a cold cache for changes to the scoring path, due in one month. (5) Roll out rule
sets region by region with an automatic halt on latency regression, due in one month.

Open questions. Should the scoring service enforce a per-client concurrency limit so that one caller
cannot exhaust shared capacity? Would a circuit breaker around address verification have turned the
incident into a brief degradation of fraud scoring instead of a checkout slowdown? Who decides when a
fraud rule may add a synchronous external call, and what latency budget does such a call get?
"""

LONG_CONTEXT_SUMMARY = (
    "Summarise the following post-incident review for an engineering manager in five bullet points: "
    "what happened, why, how it was found, how it was fixed, and what will change.\n\n" + _INCIDENT_REPORT
)
"""A long-context summarisation prompt: prefill-heavy input, a medium-length answer."""

LONG_PROMPT_HEAD = (
    "Below is a numbered log of readings from weather stations. Read all of it, then reply with the number of "
    "its last entry and nothing else.\n\n"
)
"""The instruction a prompt of exact length (`measure(prompt_tokens=N)`) opens with, when the test gives none."""

_STATIONS = ("Aldgate", "Brixham", "Corran", "Dunmore", "Elgin", "Fowey", "Girvan", "Hythe", "Ilkley", "Jarrow",
             "Kelso", "Lerwick", "Moffat")
_SKIES = ("clear", "overcast", "light rain", "fog", "showers", "broken cloud", "haze")


def log_entry(number: int) -> str:
    """Entry `number` (1-based) of the weather log: `Entry 7: station Girvan read 13.2 C, 1009 hPa, wind 21 km/h,
    sky fog.` Every field follows from the number alone (no random source), so the log is the same on every
    machine and every run; the numbers vary, so no two entries are alike."""
    station = _STATIONS[number % len(_STATIONS)]
    temperature = (number * 37) % 301 / 10 - 5
    pressure = 980 + (number * 53) % 61
    wind = (number * 29) % 90
    sky = _SKIES[number % len(_SKIES)]
    return (f"Entry {number}: station {station} read {temperature:.1f} C, {pressure} hPa, wind {wind} km/h, "
            f"sky {sky}.")


def log_words(count: int) -> list[str]:
    """The first `count` words of the weather log (entries 1, 2, ... split at spaces): the body of a prompt of
    exact length, cut at a word so that a longer cut never reads fewer tokens."""
    words: list[str] = []
    number = 0
    while len(words) < count:
        number += 1
        words.extend(log_entry(number).split(" "))
    return words[:count]


def long_prompt(words: int, head: str = LONG_PROMPT_HEAD, padding: str = "") -> str:
    """`head` (then a blank line, unless it ends in whitespace already), the first `words` words of the weather log
    joined by single spaces, then `padding` (a few one-token units that bring the prompt to its exact length:
    measurement/exact_prompt.py)."""
    opening = head if not head or head[-1].isspace() else head + "\n\n"
    return opening + " ".join(log_words(words)) + padding
