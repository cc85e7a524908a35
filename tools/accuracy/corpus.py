"""Print the log classifier's accuracy on the corpus of real user logs, honestly measured.

Usage: python -m tools.accuracy.corpus [CORPUS_DIR]
CORPUS_DIR defaults to ../shared/corpus/logs next to the repository; the repository's own extra
corpus (tests/data/corpus-extra: batch A read while writing rules, batch B held out) and the
fresh corpora (tests/data/corpus-fresh-*: batches F1-F6) are always scored too, so a clone without ../shared still reports it. Prints, for complete
and partial logs apart: the plain figure by class and engine, the leave-one-source-out
figure (rules written from a source's logs switched off for that source), the held-out
figure of every pinned stage (docs/corpus-protocol.md), and every miss with why.
Exit status 1 when fewer than FLOOR of the complete logs are right, 2 when the corpus
is not found.
"""

from __future__ import annotations

import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

from autotune.classifier import corpus
from tools import REPO
from tools.accuracy import DEFAULT_DIR, EXTRA_DIR, FRESH_DIRS

# Fresh batches (docs/corpus-protocol.md, issue 33): id prefix -> what the batch was to the rules.
FRESH_BATCHES = (("batch F1 (gathered and scored before the rules of issue 33, then read)", "4"),
                 ("batch F2 (gathered after the rules were frozen, held out)", "5"),
                 ("batch F3 (held out for its first score, before the second round of issue-33 rules; read since)",
                  "6"),
                 ("batch F4 (held out for its first score, before the third round of issue-33 rules)", "7"),
                 ("batch F5 (held out for its first score, with the third round's rules frozen; the round after F5 was "
                  "written from its misses)", "8"),
                 ("batch F6 (gathered and labelled while the round after F5 was written, by someone who never ran the "
                  "classifier on it; held out for its first score)", "9"),
                 ("batch F7 (gathered and labelled while the round after F6 was written, by someone who never ran the "
                  "classifier on it; held out for its first score)", "10"),
                 ("batch F8 (gathered and labelled while the round after F7 was written, by two who never ran the "
                  "classifier on it, one on vLLM threads (11xx), one on SGLang's (12xx); held out for its first score)",
                  ("11", "12")),
                 ("batch F9 (gathered and labelled while the round after F8 was written, by two who never ran the "
                  "classifier on it, one on vLLM threads (13xx), one on SGLang's (14xx); held out for its first score)",
                  ("13", "14")),
                 ("batch F10 (gathered and labelled while the round after F9 was written, by two who never ran the "
                  "classifier on it, one on vLLM threads (15xx), one on SGLang's (16xx); held out for its first score)",
                  ("15", "16")),
                 ("batch F11 (gathered and labelled while the round after F10 was written, by two who never ran the "
                  "classifier on it, one on vLLM threads (17xx), one on SGLang's (18xx); held out for its first score)",
                  ("17", "18")),
                 ("batch F12 (gathered and labelled while the round after F11 was written, by one who never ran the "
                  "classifier on it, on both engines' threads; held out for its first score)", "19"),
                 ("batch F13 (gathered and labelled after the round after F12, by four who never ran the classifier on "
                  "it, from four sources: downstream projects' threads (20xx), web pages (21xx), log files committed to "
                  "repositories (22xx), the engines' own threads (23xx); held out for its first score)",
                  ("20", "21", "22", "23")),
                 ("batch F14 (gathered and labelled while the round after F13 was written, by three who never ran the "
                  "classifier on it: downstream projects' threads (24xx), log files committed to repositories (25xx), "
                  "the engines' own threads (26xx); held out for its first score)", ("24", "25", "26")),
                 ("batch F15 (gathered and labelled while the round after F14 was written, by three who never ran the "
                  "classifier on it: vLLM log files committed to repositories (27xx), SGLang's (28xx), threads of "
                  "projects that launch SGLang or vLLM (29xx); held out for its first score)", ("27", "28", "29")),
                 ("batch F16 (gathered and labelled while the round after F15 was written, by three who never ran the "
                  "classifier on it, aimed at SGLang: log files committed to repositories (30xx), SGLang's own threads "
                  "and its ports' (31xx), threads of projects that launch it (32xx); held out for its first score)",
                  ("30", "31", "32")),
                 ("batch F17 (gathered and labelled while the round after F16 was written, by two who never ran the "
                  "classifier on it: log files committed to repositories (33xx), threads of any project found from "
                  "angles not used before (34xx); held out for its first score)", ("33", "34")),
                 ("batch F18 (gathered and labelled while the round after F17 was written, by two who never ran the "
                  "classifier on it: log files committed to repositories (35xx), threads found by exact exception texts "
                  "(36xx); held out for its first score)", ("35", "36")),
                 ("batch F19 (gathered and labelled while the mechanism was mended after F18, by four who never ran the "
                  "classifier on it: SGLang log files committed to repositories (37xx), threads of projects that launch "
                  "SGLang (38xx), vLLM log files committed to repositories (39xx), both engines' threads found by "
                  "hardware and setting (40xx); held out for its first score)", ("37", "38", "39", "40")),
                 ("batch F20 (gathered and labelled while the rounds after F19 and the vLLM census were written, by three "
                  "who never ran the classifier on it: SGLang's threads found by model and setting (41xx), log text in "
                  "notebooks, notes and text files (42xx), threads of projects that run vLLM or SGLang (43xx); held out "
                  "for its first score)", ("41", "42", "43")),
                 ("batch F21 (gathered and labelled while the censuses were read again after F20, by two who never ran "
                  "the classifier on it, from log files in public repositories' git mirrors already on this machine "
                  "(44xx, 45xx); held out for its first score)", ("44", "45")),
                 ("batch F22 (gathered and labelled while the older versions' censuses were read, by four who never ran "
                  "the classifier on it: SGLang's threads (46xx), vLLM's threads (47xx), threads of projects that run "
                  "them (48xx), log files and notebooks' outputs committed to repositories (49xx); held out for its "
                  "first score)", ("46", "47", "48", "49")),
                 ("batch F23 (gathered and labelled while the round after F22 was written, by three who never ran the "
                  "classifier on it, for complete excerpts: vLLM's and its ports' threads (50xx), SGLang's threads and "
                  "files (51xx), vLLM log files committed to repositories (52xx); held out for its first score)",
                  ("50", "51", "52")),
                 ("batch F24 (gathered and labelled while the round before it and the 0.4.10 / 0.8 censuses were written, "
                  "by four who never ran the classifier on it: SGLang's threads and ports (53xx), vLLM's threads (54xx), "
                  "threads of projects that run them (55xx), log files committed to repositories (56xx); held out for "
                  "its first score)", ("53", "54", "55", "56")),
                 ("batch F25 (gathered and labelled while F24 was scored and its round written, by four who never ran "
                  "the classifier on it: logs committed to deployment-recipe repositories (57xx), threads of projects "
                  "that run SGLang and SGLang's less-mined threads (58xx), threads of vLLM's hardware ports and less-mined "
                  "features (59xx), notebooks' and job outputs committed to research repositories (60xx); held out for "
                  "its first score)", ("57", "58", "59", "60")),
                 ("batch F26 (gathered and labelled while F25 was scored and its round written, by helpers who never "
                  "ran the classifier on it: threads of vLLM and SGLang on other hardware (61xx: Ascend, AMD, Intel, "
                  "Gaudi, TPU, Inferentia, MUSA, Jetson) and threads of model and application repositories (63xx); held "
                  "out for its first score)", ("61", "63")),
                 ("batch F26b (the third F26 helper's, merged after F26's round: log files, notes and notebooks "
                  "committed to repositories (62xx); held out for its first score)", ("62",)),
                 ("batch F27 (gathered and labelled while F26b was scored, by four who never ran the classifier on "
                  "it: web pages that quote a log (64xx), blog posts and tutorials (65xx), threads of SGLang and the "
                  "projects that launch it (66xx), log files committed to repositories (67xx); held out for its first "
                  "score)", ("64", "65", "66", "67")),
                 ("batch F28 (gathered and labelled while the round before it was written, by four who never ran the "
                  "classifier on it: threads of model repositories (68xx), threads of training and RL frameworks that "
                  "start the engines (69xx), the engines' own threads since 2025-09 (70xx), Hugging Face discussions "
                  "and non-English pages (71xx); held out for its first score)", ("68", "69", "70", "71")),
                 ("batch F29 (the first labelled under the written CONFIG_ERROR/CRASH rule, by four who never ran the "
                  "classifier on it: SGLang's threads (72xx), vLLM's threads (73xx), threads of projects that start the "
                  "engines and of model repositories (74xx), log files committed to repositories (75xx); held out for "
                  "its first score)", ("72", "73", "74", "75")),
                 ("batch F30 (labelled under the written CONFIG_ERROR/CRASH rule, by three who never ran the classifier "
                  "on it: SGLang's threads and ports (76xx), vLLM's threads (77xx), threads of applications, training "
                  "stacks, model repositories and forks that run the engines (78xx); held out for its first score)",
                  ("76", "77", "78")),
                 ("batch F31 (labelled under the written CONFIG_ERROR/CRASH rule, by two who never ran the classifier "
                  "on it, told to take log text only, not prose: SGLang's threads and ports (79xx), vLLM's threads and "
                  "ports (80xx); held out for its first score)", ("79", "80")),
                 ("batch F32 (labelled under the written CONFIG_ERROR/CRASH rule, by four who never ran the classifier "
                  "on it, told to take log text only: log files committed to repositories (81xx), vLLM's threads (82xx), "
                  "SGLang's threads (83xx), threads of projects that run vLLM (84xx); held out for its first score)",
                  ("81", "82", "83", "84")),
                 ("batch F33 (labelled under the written CONFIG_ERROR/CRASH rule, by two who never ran the classifier "
                  "on it, told to take log text only: threads of projects that run SGLang (85xx), both engines' threads "
                  "found by setting and situation (86xx); held out for its first score)", ("85", "86")),
                 ("batch F33b (the third F33 helper's, merged after F33 was scored: server logs committed as files to "
                  "repositories (87xx); held out for its first score)", ("87",)),
                 ("batch F34 (two helpers, server logs committed as files to repositories: SGLang-led (88xx), vLLM-led "
                  "(89xx); held out for its first score)", ("88", "89")),
                 ("batch F35 (two helpers, committed files, tutorials and downstream projects' threads: SGLang-led (90xx), "
                  "vLLM-led (91xx); held out for its first score)", ("90", "91")),
                 ("batch F36 (two helpers, logs pasted in tutorials, guides, notebooks and committed log files: SGLang-led "
                  "(92xx), vLLM-led (93xx); held out for its first score)", ("92", "93")),
                 ("batch F37 (two helpers: notebooks' saved outputs (94xx), committed log files (95xx); held out for its "
                  "first score)", ("94", "95")),
                 ("batch F38 (three helpers: committed log files (96xx), both engines' threads found by the rarer "
                  "outcomes' texts (97xx), threads of projects that launch them (98xx); held out for its first score, "
                  "with the rules of the round after F35-F37 frozen)", ("96", "97", "98")),
                 ("batch F39 (three helpers: committed log files (99xx), vLLM's and its ports' threads found by the "
                  "texts of outcomes other than hangs (100xx), SGLang's threads and its relatives' (101xx); held out for "
                  "its first score, with the rules of the round after F38 frozen)", ("99", "100", "101")),
                 ("batch F40 (three helpers: logs committed to repositories no corpus held (102xx), vLLM's threads "
                  "(103xx) and SGLang's (104xx) found by model and hardware; held out for its first score, with the "
                  "rules of the round after F39 frozen)", ("102", "103", "104")),
                 ("batch F41 (five helpers: web pages in Chinese (106xx), model vendors' threads (107xx), the engines' "
                  "threads of their newest releases (108xx), threads of projects that run them (109xx), files committed "
                  "to repositories (110xx); held out for its first score, with the rules of the round after F40 "
                  "frozen)", ("106", "107", "108", "109", "110")),
                 ("batch F42 (one helper: threads of the engines' hardware ports outside their own organisations: "
                  "Intel, Kunlun, MetaX, Tenstorrent, ROCm, a V100 fork (111xx); held out for its first score, with "
                  "the rules of the round after F41 frozen)", ("111",)),
                 ("batch F43 (two helpers: SGLang's users' threads and committed files (112xx), vLLM started by "
                  "training and evaluation tools (113xx); held out for its first score, with the rules of the round "
                  "after F41 frozen)", ("112", "113")),
                 ("batch F44 (six helpers: KV-cache and offload projects (114xx), RL frameworks (115xx), serving "
                  "platforms (116xx), multimodal and OCR models (117xx), agents, apps and evaluation tools (118xx), "
                  "quantization and speculative decoding (119xx); held out for its first score, with the rules of the "
                  "round after F41 frozen)", ("114", "115", "116", "117", "118", "119")),
                 ("batch F45 (five helpers: vLLM's threads on the settings a tuner changes (120xx), SGLang's (121xx), "
                  "edge and home hardware (122xx), cloud deployment (123xx), model vendors' threads (124xx); held out "
                  "for its first score, with the rules of the round after F44 frozen)", ("120", "121", "122", "123", "124")),
                 ("batch F46 (three helpers: vLLM's pull requests (125xx), SGLang's (126xx), the libraries below the "
                  "engines (127xx); held out for its first score, with the rules of the round after F44 frozen)",
                  ("125", "126", "127")),
                 ("batch F47 (three helpers: Hugging Face model discussions and Spaces (128xx), forums and GitHub "
                  "Discussions (129xx), the engines' old releases, vLLM 0.1-0.5 and SGLang 0.1-0.3 (130xx); held out "
                  "for its first score, with the rules of the round after F44 frozen)", ("128", "129", "130")),
                 ("batch F48 (five helpers: Hugging Face model discussions of other organisations (131xx), Hugging "
                  "Face Spaces' error pages (132xx), hardware vendors' forums (133xx), the engines' middle releases in "
                  "other projects' threads (134xx), SGLang's early releases and old vLLM elsewhere (135xx); held out "
                  "for its first score, with the rules of the round after F47 frozen)",
                  ("131", "132", "133", "134", "135")),
                 ("batch F49 (four helpers: Hugging Face discussions of still other organisations (136xx), the engines' "
                  "own old threads (137xx), Chinese clouds' and code hosts' pages (138xx), threads of the libraries "
                  "that make the checkpoints (139xx); held out for its first score, with the rules of the round after "
                  "F48 frozen)", ("136", "137", "138", "139")),
                 ("batch F50 (four helpers: threads of applications and platforms that start the engines (140xx), "
                  "notebooks' saved outputs (141xx), research code's threads (142xx), the engines' newest threads "
                  "(143xx); held out for its first score, with the rules of the round after F49 frozen)",
                  ("140", "141", "142", "143")),
                 ("batch F51 (three helpers, logs only: notebooks' saved outputs found by task names (144xx) and by "
                  "generic names (145xx), server logs committed as files (146xx); held out for its first score, with "
                  "the rules of the round after F50 frozen)", ("144", "145", "146")),
                 ("batch F52 (five helpers, logs only: notebooks' saved outputs (147xx), vLLM server logs committed as "
                  "files (148xx), SGLang's (149xx), logs pasted into committed markdown (150xx), downstream projects' "
                  "threads (151xx); held out for its first score, with the rules of be832b2 frozen)",
                  ("147", "148", "149", "150", "151")),
                 ("batch F53 (four helpers, logs only: Kaggle notebooks' saved outputs (152xx), cloud vendors' and "
                  "platforms' samples (153xx), logs committed by research and evaluation code (154xx), failures "
                  "committed as files (155xx); held out for its first score, with the rules of the round after F52 "
                  "frozen)", ("152", "153", "154", "155")),
                 ("batch F54 (four helpers, logs only, failures sought on purpose: serving platforms (156xx), model "
                  "vendors' threads (157xx), RL frameworks' rollout engines (158xx), logs committed as files (159xx); "
                  "held out for its first score, with the rules of ec9eecd frozen)", ("156", "157", "158", "159")),
                 ("batch F55 (four helpers, logs committed as files: notebooks running vLLM in Unsloth (160xx), RL "
                  "repositories (161xx), evaluation and benchmark logs (162xx), SGLang's (163xx); held out for its "
                  "first score, with the rules of 27b9330 frozen)", ("160", "161", "162", "163")),
                 ("batch F56 (four helpers, logs only, from issue and pull-request threads found with narrow queries: "
                  "SGLang by hardware and deployment (164xx), SGLang by feature (165xx), SGLang inside other projects "
                  "(166xx), vLLM by release, feature and hardware (167xx); held out for its first score, with the "
                  "rules of e96f641 frozen)", ("164", "165", "166", "167")),
                 ("batch F57 (four helpers, complete excerpts only: SGLang threads by model (168xx), vLLM threads by "
                  "the deciding line's words (169xx), projects that run either engine (170xx), discussions and pages "
                  "(171xx); held out for its first score, with the rules of b769640 frozen)",
                  ("168", "169", "170", "171")),
                 ("batch F58 (four helpers, complete and partial excerpts: pages and write-ups' own repositories, "
                  "sought on vLLM's forum (172xx) and in discussions, forums and write-ups (173xx), SGLang threads by "
                  "feature (174xx), vLLM threads of its 2026 releases (175xx); held out for its first score, with the "
                  "rules of bf79780 frozen)", ("172", "173", "174", "175")),
                 ("batch F59 (three helpers, complete and partial excerpts: vLLM's threads by hardware, model and feature "
                  "(176xx), SGLang's the same way (177xx), projects no corpus held a thread of (178xx); held out for its "
                  "first score, with the rules of 0763928 frozen)", ("176", "177", "178")),
                 ("batch F60 (three helpers, complete and partial excerpts: threads found by the round after F59's own "
                  "kinds of line (179xx), threads about trouble once the server runs (180xx), hardware and model "
                  "vendors' repositories (181xx); held out for its first score, with the rules of 5888129 frozen)",
                  ("179", "180", "181")),
                 ("batch F61 (three helpers, complete and partial excerpts: threads found by out-of-memory reports other "
                  "than torch's on CUDA (182xx), by hangs (183xx), by refused combinations of choices (184xx); held out "
                  "for its first score, with the rules of d8b8ed8 frozen)", ("182", "183", "184")),
                 ("batch F62 (three helpers, complete and partial excerpts: SGLang's threads at large (185xx), vLLM's "
                  "(186xx), threads where memory ran out (187xx); held out for its first score, with the rules of "
                  "db2d1e9 frozen)", ("185", "186", "187")),
                 ("batch F63 (three helpers, complete and partial excerpts drawn at large: threads by model family "
                  "(188xx), by GPU and host (189xx), projects that launch the engines (190xx); held out for its first "
                  "score, with the rules of 8026e4d frozen)", ("188", "189", "190")),
                 ("batch F64 (three helpers, complete and partial excerpts: either engine at large (191xx), memory told by "
                  "a runtime beneath the engine (192xx), hangs and busy devices (193xx); held out for its first score "
                  "both from the rules of 28c1a61 and from the round written from the runtime census)",
                  ("191", "192", "193")),
                 ("batch F65 (three helpers, complete and partial excerpts: hangs told by the communication layers "
                  "(194xx), device memory told by runtimes other than torch on CUDA (195xx), either engine at large "
                  "(196xx); held out for its first score, with the rules of fa03cea frozen)", ("194", "195", "196")),
                 ("batch F66 (two helpers, complete and partial excerpts: hangs in the engines' own threads (197xx) and "
                  "in the launchers' (198xx); held out for its first score both from the rules of 7aecfd7 and from the "
                  "round written from the runtime census's second part)", ("197", "198")),
                 ("batch F67 (three helpers, complete excerpts above all: committed whole logs (199xx), servers that "
                  "stopped making progress while serving (200xx), either engine on other platforms (201xx); held out "
                  "for its first score, with the rules of ff0a184 frozen)", ("199", "200", "201")),
                 ("batch F68 (three helpers: committed whole logs (202xx), SGLang in the threads of projects that launch "
                  "it (203xx), vLLM in theirs (204xx); held out for its first score both from the rules of ec173c4, "
                  "frozen while it was gathered, and from the round written from the launch census's second part)",
                  ("202", "203", "204")),
                 ("batch F69 (three helpers, committed whole logs: vLLM's above all (205xx), SGLang's (206xx), "
                  "projects that wrap either (207xx); held out for its first score both from the rules of 830ce7a, "
                  "frozen while it was gathered, and from the round written from the launch census's third part)",
                  ("205", "206", "207")))


def _in_batch(case_id: str, prefixes: str | tuple[str, ...]) -> bool:
    """Whether a fresh case's id is one of a batch's: a prefix names the ids two digits longer
    than itself (F1's "4" is 401-499, F19's "40" is 4001-4099)."""
    return any(case_id.startswith(p) and len(case_id) == len(p) + 2
               for p in ((prefixes,) if isinstance(prefixes, str) else prefixes))


def _by_kind(results: list[corpus.CaseResult], hit: Callable[[corpus.CaseResult], bool]) -> str:
    """How often `hit` holds, complete and partial logs apart."""
    out = []
    for complete in (True, False):
        group = [r for r in results if r.case.complete is complete]
        out.append(f"{'complete' if complete else 'partial'} {_pct(sum(map(hit, group)), len(group))}")
    return ", ".join(out)


def _among_readings(results: list[corpus.CaseResult]) -> str:
    """How often the label is the outcome or one of the alternatives the classification gives (an
    ambiguous log says both): complete and partial logs apart."""
    return ("label among the readings (outcome or an alternative): "
            + _by_kind(results, lambda r: r.case.expected in r.readings))


# A line of an engine's own log, as it prints it (a vLLM-style header with its date, SGLang's bracketed date, a traceback
# frame, uvicorn's `INFO:`), behind a process tag or a few markup characters at most: what tells a log excerpt from an
# error told in a sentence, a FAQ or a title. Three or more make an excerpt a log (docs/corpus-protocol.md, "The three
# batches after F46"; fixed before F50 was scored).
_ENGINE_LOG_LINE = re.compile(
    r'^\W{0,6}(?:\(\w[^)]*pid=\d+\)\s*)?(?:(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+\d{2}-\d{2} \d{2}:\d{2}:\d{2}'
    r'|\[\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}[^\]]*\]|\s*File "[^"]+", line \d+, in |INFO:\s+\S)', re.M)
LOG_LINES_FOR_A_LOG = 3


def _by_log_lines(results: list[corpus.CaseResult]) -> str:
    """Complete logs right, apart for excerpts that are logs (LOG_LINES_FOR_A_LOG engine log lines or more) and
    those that are not (an error told in prose)."""
    logs: list[corpus.CaseResult] = []
    others: list[corpus.CaseResult] = []
    for r in results:
        if r.case.complete:
            is_log = len(_ENGINE_LOG_LINE.findall(corpus.case_text(r.case))) >= LOG_LINES_FOR_A_LOG
            (logs if is_log else others).append(r)
    return (f"complete logs that are logs ({LOG_LINES_FOR_A_LOG}+ engine log lines): "
            f"{_pct(sum(r.right for r in logs), len(logs))}, the others: {_pct(sum(r.right for r in others), len(others))}")


def _partial_ceiling(results: list[corpus.CaseResult]) -> str:
    """What the partial logs hold for any reading of them: how many show no failure line (the reading says so, no
    outcome), and the best figure a reading could reach that knew only what the classifier settles on (its outcome,
    the phase it reached, its confidence), each such group given its most common label, fitted on these very logs.
    Where that ceiling is below the goal, no rule that reads the same lines gets there without guessing."""
    group = [r for r in results if r.case.partial]
    buckets: dict[tuple[str, str, str], Counter[str]] = defaultdict(Counter)
    for r in group:
        buckets[(r.outcome, r.got.phase.value, r.got.confidence)][r.case.expected] += 1
    best = sum(labels.most_common(1)[0][1] for labels in buckets.values())
    undecided = sum(r.outcome == "None" for r in group)
    return (f"partial logs with no outcome in view: {_pct(undecided, len(group))}; the most a reading of what the "
            f"classifier settles on could get, each (outcome, phase, confidence) given its commonest label, fitted on "
            f"these logs: {_pct(best, len(group))}")


def _sure_and_wrong(results: list[corpus.CaseResult]) -> str:
    """How often a reading misleads (corpus.CaseResult.misleads): complete and partial logs apart."""
    return "wrong and not saying so (not low, the label no alternative): " + _by_kind(results, lambda r: r.misleads)


FLOOR = 0.90


def _pct(right: int, total: int) -> str:
    return f"{right}/{total} ({100 * right / total:.0f} %)" if total else "-"


def _held_out(cases: list[corpus.CorpusCase], which: str = "shared") -> None:
    print("held out: each pinned stage, run from git, on the cases added after its rules were written")
    for stage in corpus.stages(which):
        try:
            outcomes = corpus.held_out(stage, cases, REPO)
        except (RuntimeError, OSError) as exc:
            print(f"  {stage.name} ({stage.commit[:10]}): not measured here ({exc})")
            continue
        unseen = [c for c in cases if c.id in outcomes]
        for complete in (True, False):
            group = [c for c in unseen if c.complete is complete]
            right = sum(outcomes[c.id] == c.expected for c in group)
            kind = "complete" if complete else "partial"
            print(f"  {stage.name} ({stage.commit[:10]}), ids >= {stage.held_out_from_id}, {kind}: "
                  f"{_pct(right, len(group))}")
    print()


def _extra() -> list[corpus.CaseResult]:
    """The repository's extra corpus: batch A (ids 2xx, read while writing rules) and batch B
    (ids 3xx, held out), by class, the pinned stage's held-out figure, and B's misses; its results."""
    cases = corpus.load(EXTRA_DIR)
    results = corpus.evaluate(cases)
    print(f"extra corpus: {EXTRA_DIR.relative_to(REPO)} ({len(results)} cases)\n")
    for name, digit in (("batch A (read while writing rules)", "2"), ("batch B (held out)", "3")):
        group = [r for r in results if r.case.id.startswith(digit)]
        print(f"{name}: complete {_pct(*corpus.score(group, complete=True))}, "
              f"partial {_pct(*corpus.score(group, complete=False))}")
        print(_sure_and_wrong(group))
        print(corpus.accuracy_table(group))
    _held_out(cases, "extra")
    misses = [r for r in results if not r.right]
    print(f"extra corpus misses ({len(misses)}):" if misses else "extra corpus misses: none")
    for result in misses:
        print(corpus.describe_miss(result))
    print()
    return results


def _fresh() -> list[corpus.CaseResult]:
    """Each fresh corpus (tests/data/corpus-fresh-*): per batch, complete and partial by class, and
    every miss; their results."""
    every: list[corpus.CaseResult] = []
    for directory in FRESH_DIRS:
        cases = corpus.load(directory)
        results = corpus.evaluate(cases)
        print(f"fresh corpus: {directory.relative_to(REPO)} ({len(results)} cases)\n")
        for name, digit in FRESH_BATCHES:
            group = [r for r in results if _in_batch(r.case.id, digit)]
            if not group:
                continue
            print(f"{name}: complete {_pct(*corpus.score(group, complete=True))}, "
                  f"partial {_pct(*corpus.score(group, complete=False))}")
            print(_among_readings(group))
            print(_sure_and_wrong(group))
            print(_by_log_lines(group))
            stated = [r for r in group if r.case.label_confidence != "low"]
            print(f"labels the thread states (not judgement calls): complete "
                  f"{_pct(*corpus.score(stated, complete=True))}, partial {_pct(*corpus.score(stated, complete=False))}")
            print(corpus.accuracy_table(group))
        print(f"all batches: complete {_pct(*corpus.score(results, complete=True))}, "
              f"partial {_pct(*corpus.score(results, complete=False))}")
        print(_among_readings(results))
        print(_sure_and_wrong(results))
        print(_partial_ceiling(results))
        print(_by_log_lines(results) + "\n")
        _damaged(cases, results)
        misses = [r for r in results if not r.right]
        print(f"fresh corpus misses ({len(misses)}):" if misses else "fresh corpus misses: none")
        for result in misses:
            print(corpus.describe_miss(result))
        print()
        every += results
    return every


def _damaged(cases: list[corpus.CorpusCase], results: list[corpus.CaseResult]) -> None:
    """Each damage done to every complete log: right after it, of those right before."""
    right = {r.case.id for r in results if r.right}
    print("damaged pastes (every log re-wrapped, quoted, coloured, ...), complete logs:")
    for name, damage in corpus.DAMAGE.items():
        damaged = corpus.evaluate_damaged(cases, damage)
        kept = [r for r in damaged if r.case.id in right and r.case.complete]
        print(f"  {name:<30}{_pct(*corpus.score(damaged, complete=True))}, still right of those right undamaged "
              f"{_pct(sum(r.right for r in kept), len(kept))}")
    print()


def _unnamed(told: list[corpus.CaseResult]) -> None:
    """Every corpus read as `autotune classify` reads a log when nobody names its engine: how often its lines name the
    engine (and name it right), and the readings so made against `told`, those told the labelled engine."""
    unnamed = corpus.evaluate_unnamed([r.case for r in told])
    said = [(r, engine) for r, engine in unnamed if engine is not None]
    wrong = [r.case.id for r, engine in said if engine != r.case.engine]
    print(f"engine not named (`autotune classify` without --engine), every corpus: the log's lines name an engine in "
          f"{_pct(len(said), len(unnamed))}, the wrong one in {len(wrong)} ({', '.join(wrong[:12])}); the others are "
          "read with each engine's rules, the reading that decides kept")
    results = [r for r, _ in unnamed]
    for complete in (True, False):
        print(f"  {'complete' if complete else 'partial'}: {_pct(*corpus.score(results, complete=complete))}, told the "
              f"engine {_pct(*corpus.score(told, complete=complete))}")
    print()


def _cost(cases: list[corpus.CorpusCase]) -> None:
    """The classifier's cost a line, measured (CPU time) on every corpus log, each fed line by line as a trial
    feeds it: a figure to compare within one machine, not a bound."""
    texts = [corpus.case_text(c) for c in cases]
    start = time.process_time()
    corpus.evaluate(cases)
    cpu = time.process_time() - start
    lines = sum(len(t.splitlines()) for t in texts)
    print(f"classifier cost: {lines} lines of {len(cases)} logs in {cpu:.2f} s of CPU "
          f"({1e6 * cpu / max(lines, 1):.1f} us a line)\n")


def main(argv: list[str]) -> int:
    directory = Path(argv[0]) if argv else DEFAULT_DIR
    extra = _extra()
    fresh = _fresh()
    try:
        cases = corpus.load(directory)
    except FileNotFoundError:
        print(f"no corpus at {directory} (expected index.jsonl there)", file=sys.stderr)
        return 2
    results = corpus.evaluate(cases)
    print(f"corpus: {directory} ({len(results)} cases)\n")
    print(corpus.accuracy_table(results))
    loso = corpus.leave_one_source_out(cases)
    print("leave-one-source-out (rules derived from a source's logs switched off for it):")
    for complete in (True, False):
        print(f"  {'complete' if complete else 'partial'}: {_pct(*corpus.score(loso, complete=complete))}")
    print()
    _held_out(cases)
    _damaged(cases, results)
    overall = corpus.score(results, complete=True)
    print(f"overall: complete {_pct(*overall)}, partial {_pct(*corpus.score(results, complete=False))}")
    print(_among_readings(results))
    print(_sure_and_wrong(results) + "\n")
    told = [*results, *extra, *fresh]
    _unnamed(told)
    _cost([r.case for r in told])
    misses = [r for r in results if not r.right]
    print(f"misses ({len(misses)}):" if misses else "misses: none")
    for result in misses:
        print(corpus.describe_miss(result))
    return 0 if overall[1] and overall[0] >= FLOOR * overall[1] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
