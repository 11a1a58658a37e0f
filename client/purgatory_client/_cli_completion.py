"""``purgatory completion bash|zsh``: a shell completion script, made from the parser.

The script is generated from the same argparse tree that parses the command line, so a
new subcommand or option completes without a change here: the global options, the
subcommands, each subcommand's options and choices (``purgatories list|get|...``,
``ls --state watching|...``). Install with ``eval "$(purgatory completion bash)"`` in
``~/.bashrc`` (zsh: ``eval "$(purgatory completion zsh)"``, through bashcompinit).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

__all__ = ["print_script", "register", "words"]


def register(sub: Any) -> None:
    completion = sub.add_parser(
        "completion",
        help="print a shell completion script",
        epilog='example: eval "$(purgatory completion bash)" (in ~/.bashrc)',
    )
    completion.add_argument("shell", choices=["bash", "zsh"], help="the shell")


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def words(parser: argparse.ArgumentParser) -> list[str]:
    """Every option string and choice ``parser`` accepts (its own level only)."""
    out: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            out += list(action.choices)
        else:
            out += [o for o in action.option_strings if o.startswith("--")]
            if action.choices is not None and not action.option_strings:
                out += [str(c) for c in action.choices]
    return out


def _case_arms(parser: argparse.ArgumentParser) -> list[str]:
    arms = []
    for name, child in _subparsers(parser).items():
        candidates = words(child)
        for grandchild in _subparsers(child).values():
            candidates += words(grandchild)
        arms.append(f"        {name}) opts={shlex.quote(' '.join(sorted(set(candidates))))} ;;")
    return arms


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    top = " ".join(words(parser))
    prelude = "autoload -U +X bashcompinit && bashcompinit\n" if shell == "zsh" else ""
    arms = "\n".join(_case_arms(parser))
    valued = "|".join(
        o for a in parser._actions if a.option_strings and a.nargs != 0 for o in a.option_strings
    )
    return f"""{prelude}# purgatory {shell} completion: eval "$(purgatory completion {shell})"
_purgatory() {{
    local cur cmd opts word skip
    cur="${{COMP_WORDS[COMP_CWORD]}}"
    cmd=""
    skip=""
    for word in "${{COMP_WORDS[@]:1:COMP_CWORD-1}}"; do
        if [[ -n "$skip" ]]; then skip=""; continue; fi
        case "$word" in
            {valued}) skip=1 ;;
            -*) ;;
            *) cmd="$word"; break ;;
        esac
    done
    case "$cmd" in
        "") opts={shlex.quote(top)} ;;
{arms}
        *) opts="" ;;
    esac
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
}}
complete -o default -F _purgatory purgatory
"""


def print_script(parser: argparse.ArgumentParser, shell: str) -> int:
    sys.stdout.write(script(parser, shell))
    return 0
