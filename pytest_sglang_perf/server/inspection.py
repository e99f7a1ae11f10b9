"""After a boot: read the server's log and `/server_info`, and judge what it really runs (see effective.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from pytest_sglang_perf.server.boot import RunningServer
from pytest_sglang_perf.server.effective import EffectiveConfig, evaluate, redact_info, same_as, unavailable
from pytest_sglang_perf.server.info import ServerInfoError, fetch_server_info
from pytest_sglang_perf.server.logscan import first_rank_messages
from pytest_sglang_perf.server.plan import ServerPlan
from pytest_sglang_perf.server.redaction import secret_values
from pytest_sglang_perf.server.startup import StartupFacts, startup_facts
from pytest_sglang_perf.sglang_facts.parsers import ArgParser
from pytest_sglang_perf.sglang_facts.requested import requested_flags
from pytest_sglang_perf.sglang_facts.rules import SGLangRules, load_rules, rules_note


def inspect_server(name: str, plan: ServerPlan, server: RunningServer, parser: ArgParser,
                   earlier: Sequence[EffectiveConfig]) -> tuple[EffectiveConfig, StartupFacts]:
    """The variant's effective configuration (compared with the variants booted before it) and startup facts."""
    text = server.log_text()
    facts = startup_facts(text)
    try:
        info = fetch_server_info(server.base_url, plan.api_key)
    except ServerInfoError as exc:
        return unavailable(name, str(exc), facts), facts
    version = str(info.get("version") or parser.version)
    rules = load_rules(version)
    info = redact_info(info, rules, secret_values(plan.args, plan.api_key, plan.admin_api_key))
    try:
        config = evaluate(name, requested_flags(plan.args, parser), info, facts, first_rank_messages(text), rules,
                          log_seen=plan.url is None)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:  # an unexpected /server_info shape
        why = f"/server_info has a shape this plugin does not know ({type(exc).__name__}: {exc})"
        return unavailable(name, why, facts), facts
    return dataclasses.replace(_with_duplicate(config, earlier, rules), facts_note=rules_note(version)), facts


def _with_duplicate(config: EffectiveConfig, earlier: Sequence[EffectiveConfig],
                    rules: SGLangRules) -> EffectiveConfig:
    for other in earlier:
        why = same_as(config, other, rules)
        if why is not None:
            return dataclasses.replace(config, duplicate=why)
    return config
