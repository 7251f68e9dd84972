"""Loading a campaign file: YAML with line tracking, inlined references, `--set` overrides and errors.

A campaign file names or inlines a `cluster`, a `model` and a failure profile; a string in place of a mapping
is a path to another YAML file, relative to the file that names it. Every key's file and line are recorded, so a
validation error reads `file:line: field.path: message` and says how to fix it.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from campaign.config.schema import WORKSPACE_PLACEHOLDER, CampaignConfig, config_digest
from campaign.errors import ConfigError
from campaign.files import FileTooLarge, NotRegularFile, read_bounded


@dataclass(frozen=True)
class LoadedConfig:
    """A validated config with where it came from and its digest."""

    config: CampaignConfig
    path: Path
    digest: str
    overrides: tuple[str, ...] = ()
    files: tuple[Path, ...] = field(default_factory=tuple)

    @property
    def base_dir(self) -> Path:
        return self.path.parent


Where = tuple[str, int]  # (file, line)
KeyPath = tuple[str | int, ...]

# Keys whose string value names another YAML file to inline.
_REFERENCE_KEYS: dict[KeyPath, str] = {
    ("cluster",): "mapping",
    ("model",): "mapping",
    ("cluster", "failures"): "list",
    ("cluster", "accelerator"): "mapping",
}


def load_config(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> LoadedConfig:
    """Load, resolve references, apply `--set` overrides, validate and digest a campaign file.

    Raises ConfigError naming file:line: field.path with the fix.
    """
    path = Path(path)
    data, where, files = _read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(
            "a campaign file must be a YAML mapping", where=f"{path}:1", fix="see configs/campaigns/demo.yaml"
        )
    for key_path, kind in _REFERENCE_KEYS.items():
        _inline_reference(data, key_path, kind, path, where, files)
    for text in overrides:
        _apply_override(data, text, where)
    _resolve_source_paths(data, path)
    try:
        config = CampaignConfig.model_validate(data)
    except ValidationError as exc:
        raise _config_error(exc, where, path) from None
    return LoadedConfig(
        config=config, path=path, digest=config_digest(config), overrides=tuple(overrides), files=tuple(files)
    )


# A campaign file and the files it names are a few kilobytes: a bigger one is refused before it is read whole.
MAX_CONFIG_BYTES = 1 << 20


def _read_yaml(path: Path) -> tuple[Any, dict[KeyPath, Where], list[Path]]:
    try:
        text = read_bounded(path, MAX_CONFIG_BYTES).decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(
            "config file not found", where=str(path), fix="check the path; configs live in configs/campaigns/"
        ) from None
    except NotRegularFile as exc:
        raise ConfigError(
            f"a config must be a regular file; this is {exc.strerror}",
            where=str(path),
            fix="pass a YAML file (configs live in configs/campaigns/)",
        ) from None
    except FileTooLarge as exc:
        raise ConfigError(
            f"config file too large: {exc.strerror} (a campaign file and the files it names are a few kilobytes)",
            where=str(path),
            fix="pass the campaign YAML file, not a data file",
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"cannot read config: {exc}", where=str(path), fix="save the file as UTF-8 text"
        ) from None
    node, data = parse_yaml(text, str(path))
    where: dict[KeyPath, Where] = {}
    if node is not None:
        _locate(node, (), str(path), where)
    return data, where, [path]


# A config is small: these bounds stop a YAML alias bomb or a nesting attack long before they cost anything.
MAX_YAML_DEPTH = 64
MAX_YAML_NODES = 200_000


# libyaml's loader where PyYAML was built with it (the wheels are): the same nodes, marks and values, ten times
# faster; a config and each `--set` value are parsed on every command.
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_yaml(text: str, where: str) -> tuple[yaml.Node | None, Any]:
    """Parse YAML text safely: syntax errors, nesting deeper than MAX_YAML_DEPTH and aliases that expand
    to more than MAX_YAML_NODES nodes are ConfigErrors naming `where`."""
    try:
        node = yaml.compose(text, Loader=_LOADER)
        if node is not None:
            _check_yaml_size(node, where)
        data = yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else 1
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(
            f"invalid YAML: {problem}", where=f"{where}:{line}", fix="fix the YAML syntax at that line"
        ) from None
    except RecursionError:
        raise ConfigError(
            f"YAML nested more than {MAX_YAML_DEPTH} levels deep",
            where=where,
            fix="a campaign file is a few levels deep; flatten the structure",
        ) from None
    return node, data


def _check_yaml_size(root: yaml.Node, where: str) -> None:
    """Depth and expanded size of a composed YAML graph, counting each alias as the copy it stands for."""
    expanded: dict[int, int] = {}

    def size(node: yaml.Node, depth: int) -> int:
        if depth > MAX_YAML_DEPTH:
            raise ConfigError(
                f"YAML nested more than {MAX_YAML_DEPTH} levels deep",
                where=f"{where}:{node.start_mark.line + 1}",
                fix="a campaign file is a few levels deep; flatten the structure",
            )
        if id(node) in expanded:
            return expanded[id(node)]
        total = 1
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        else:
            children = []
        for child in children:
            total += size(child, depth + 1)
            if total > MAX_YAML_NODES:
                raise ConfigError(
                    f"YAML expands to more than {MAX_YAML_NODES:,} values (aliases repeat whole sections)",
                    where=f"{where}:{node.start_mark.line + 1}",
                    fix="remove the repeated aliases (*name) or write the values out",
                )
        expanded[id(node)] = total
        return total

    size(root, 0)


def _locate(node: yaml.Node, prefix: KeyPath, file: str, out: dict[KeyPath, Where]) -> None:
    out[prefix] = (file, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = key_node.value
            if key in seen:
                raise ConfigError(
                    f"key '{key}' appears twice (first on line {seen[key]})",
                    where=f"{file}:{key_node.start_mark.line + 1}: {_dotted((*prefix, key))}",
                    fix="keep one of them",
                )
            seen[key] = key_node.start_mark.line + 1
            out[(*prefix, key)] = (file, key_node.start_mark.line + 1)
            _locate(value_node, (*prefix, key), file, out)
            out[(*prefix, key)] = (file, key_node.start_mark.line + 1)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _locate(item, (*prefix, index), file, out)


def _inline_reference(
    data: dict,
    key_path: KeyPath,
    kind: str,
    campaign_path: Path,
    where: dict[KeyPath, Where],
    files: list[Path],
) -> None:
    parent: Any = data
    for key in key_path[:-1]:
        if not isinstance(parent, dict) or key not in parent:
            return
        parent = parent[key]
    last = key_path[-1]
    if not isinstance(parent, dict) or not isinstance(parent.get(last), str):
        return
    referring_file = Path(where.get(key_path, (str(campaign_path), 0))[0])
    target = (referring_file.parent / parent[last]).resolve()
    if not target.exists():
        file, line = where.get(key_path, (str(campaign_path), 1))
        raise ConfigError(
            f"referenced file '{parent[last]}' not found (looked for {target})",
            where=f"{file}:{line}: {_dotted(key_path)}",
            fix="give a path relative to the file that names it, or inline the section",
        )
    sub_data, sub_where, _ = _read_yaml(target)
    expected = dict if kind == "mapping" else list
    if not isinstance(sub_data, expected):
        raise ConfigError(
            f"expected a YAML {kind} in this file",
            where=f"{target}:1: {_dotted(key_path)}",
            fix=f"make the file's top level a {kind}",
        )
    parent[last] = sub_data
    for sub_path, loc in sub_where.items():
        where[key_path + sub_path] = loc
    files.append(target)


def _apply_override(data: dict, text: str, where: dict[KeyPath, Where]) -> None:
    if "=" not in text:
        raise ConfigError(f"override '{text}' has no '='", where="--set", fix="write --set dotted.key=value")
    dotted, raw = text.split("=", 1)
    keys = override_keys(dotted)
    try:
        value = parse_yaml(raw, f"--set {text}")[1] if raw.strip() else ""
    except ConfigError as err:
        if "nested" in err.message or "expands" in err.message:
            raise
        value = raw
    node: Any = data
    for depth, key in enumerate(keys[:-1]):
        if isinstance(node, list):
            node = node[_list_index(node, key, keys[:depth], dotted)]
            continue
        if not isinstance(node, dict):
            raise ConfigError(
                f"cannot set '{dotted}': '{_dotted(tuple(keys[:depth]))}' is not a mapping",
                where="--set",
                fix="check the dotted key against the config file",
            )
        node = node.setdefault(key, {})
    last = keys[-1]
    if isinstance(node, list):
        last = _list_index(node, last, keys[:-1], dotted)
    elif not isinstance(node, dict):
        raise ConfigError(
            f"cannot set '{dotted}'", where="--set", fix="check the dotted key against the config file"
        )
    node[last] = value
    where[tuple(keys)] = (f"--set {text}", 0)


_KEY_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]|\.")


def override_keys(dotted: str) -> list[str | int]:
    """The keys of a `--set` path: `cluster.failures.0.per_gpu_year` and `cluster.failures[0].per_gpu_year` are
    the same path; a part of digits is a list index."""
    text = dotted.strip()
    keys: list[str | int] = []
    pos = 0
    while pos < len(text):
        match = _KEY_PART.match(text, pos)
        if match is None or (match.group(0) == "." and (pos == 0 or text[pos - 1] == ".")):
            raise ConfigError(
                f"cannot read the key '{dotted}' (at character {pos + 1})",
                where="--set",
                fix="write dotted.key=value; a list item is key.0 or key[0], e.g. cluster.failures[0].per_gpu_year=5000",
            )
        name, index = match.group(1), match.group(2)
        if index is not None:
            keys.append(int(index))
        elif name is not None:
            keys.append(int(name) if name.isdigit() else name)
        pos = match.end()
    if not keys or text.endswith("."):
        raise ConfigError(
            f"cannot read the key '{dotted}'", where="--set", fix="write dotted.key=value, e.g. seed=7"
        )
    return keys


def _list_index(node: list[Any], key: str | int, prefix: list[str | int], dotted: str) -> int:
    """`key` as an index of the list at `prefix`, or a ConfigError naming the list's length."""
    where = _dotted(tuple(prefix)) or "(top level)"
    if not isinstance(key, int):
        raise ConfigError(
            f"cannot set '{dotted}': {where} is a list, so the next key is an item's number, not '{key}'",
            where="--set",
            fix=f"write {where}.0 or {where}[0] for its first item",
        )
    if key >= len(node):
        raise ConfigError(
            f"cannot set '{dotted}': {where} has {len(node)} item(s), numbered from 0",
            where="--set",
            fix=f"use an index from 0 to {len(node) - 1}" if node else f"add the item to {where} in the file",
        )
    return key


def _resolve_source_paths(data: dict, campaign_path: Path) -> None:
    """Make data source globs absolute, relative to the campaign file, so digests do not depend on the cwd."""
    section = data.get("data")
    if not isinstance(section, dict):
        return  # not a mapping: the model's validation reports it

    def resolve(path: str) -> str:
        # `{workspace}/...` is resolved against the workspace when a stage runs (DataConfig.in_workspace).
        if path.startswith(WORKSPACE_PLACEHOLDER) or Path(path).is_absolute():
            return path
        return str((campaign_path.parent / path).resolve())

    if isinstance(section.get("demo_corpus_dir"), str):
        section["demo_corpus_dir"] = resolve(section["demo_corpus_dir"])
    tokenizer = section.get("tokenizer")
    if isinstance(tokenizer, str) and tokenizer.endswith(".json") and not Path(tokenizer).is_absolute():
        section["tokenizer"] = str((campaign_path.parent / tokenizer).resolve())
    cleaning = section.get("cleaning")
    url_filter = cleaning.get("url_filter") if isinstance(cleaning, dict) else None
    if isinstance(url_filter, dict):
        for key in ("domains_file", "substrings_file", "regexes_file"):
            if isinstance(url_filter.get(key), str):
                url_filter[key] = resolve(url_filter[key])
    decontaminate = section.get("decontaminate")
    benchmarks = decontaminate.get("benchmarks") if isinstance(decontaminate, dict) else None
    for bench in benchmarks if isinstance(benchmarks, list) else ():
        if isinstance(bench, dict) and isinstance(bench.get("path"), str):
            bench["path"] = resolve(bench["path"])
    sources = section.get("sources")
    if not isinstance(sources, list):
        return
    for source in sources:
        if isinstance(source, dict) and isinstance(source.get("path"), str):
            source["path"] = resolve(source["path"])


def _config_error(exc: ValidationError, where: dict[KeyPath, Where], path: Path) -> ConfigError:
    lines: list[str] = []
    for err in exc.errors():
        loc = tuple(k for k in err["loc"] if _is_yaml_key(k))
        if (
            err["type"] == "extra_forbidden" and err["loc"]
        ):  # the unknown key is the user's, whatever it looks like
            loc = (*(k for k in err["loc"][:-1] if _is_yaml_key(k)), err["loc"][-1])
        msg = _message(err, loc)
        if msg.startswith("@"):
            dotted, msg = msg[1:].split(": ", 1)
            loc = loc + tuple(int(k) if k.isdigit() else k for k in dotted.split("."))
        file, line = _nearest(loc, where, path)
        at = f"{file}:{line}" if line else file
        line_text = f"{at}: {_dotted(loc) or '(top level)'}: {msg}"
        if line_text not in lines:
            lines.append(line_text)
    message = "\n".join(lines)
    return ConfigError(
        message,
        fix="correct the field(s) above; `campaign --help` and configs/campaigns/demo.yaml show every key",
    )


def _is_yaml_key(key: str | int) -> bool:
    """pydantic puts union members and validator names ('float', "literal['auto']", 'function-after[...]') into
    an error's loc; they are not keys a user typed."""
    if isinstance(key, int):
        return True
    return not (key in ("float", "int", "str", "bool") or "[" in key or key.startswith("function-"))


def _nearest(loc: KeyPath, where: dict[KeyPath, Where], path: Path) -> Where:
    for cut in range(len(loc), -1, -1):
        if loc[:cut] in where:
            return where[loc[:cut]]
    return (str(path), 0)


def _message(err: ErrorDetails, loc: KeyPath) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        model = _model_at(loc[:-1])
        allowed = sorted(model.model_fields) if model else []
        # aliases are what users type
        if model:
            allowed = sorted((f.alias or n) for n, f in model.model_fields.items())
        close = difflib.get_close_matches(str(loc[-1]), [a for a in allowed if a != str(loc[-1])], n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        return f"unknown key '{loc[-1]}'{hint} allowed keys: {', '.join(allowed)}"
    if kind == "missing":
        return "required key is missing; add it"
    msg = err["msg"]
    msg = msg.removeprefix("Value error, ")
    value = err.get("input")
    if kind not in ("model_type",) and not isinstance(value, (dict, list)):
        msg += f" (got {value!r})"
    return msg


def _model_at(loc: KeyPath) -> type[BaseModel] | None:
    model: Any = CampaignConfig
    for key in loc:
        if isinstance(key, int):
            continue
        fields = getattr(model, "model_fields", None)
        if not fields:
            return None
        field_info = fields.get(key) or next((f for f in fields.values() if f.alias == key), None)
        if field_info is None:
            return None
        model = _unwrap(field_info.annotation)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _unwrap(annotation: Any) -> Any:
    args = getattr(annotation, "__args__", None)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in args or ():
        inner = _unwrap(arg)
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            return inner
    return annotation


def _dotted(loc: KeyPath) -> str:
    out = ""
    for key in loc:
        out += f"[{key}]" if isinstance(key, int) else (f".{key}" if out else str(key))
    return out
