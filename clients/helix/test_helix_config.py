"""Checks the Helix set-up offline: TOML keys and types as Helix's languages.toml and config.toml
accept them (helix book `languages.md`, `configuration.md`, 25.07), the commands against the
server's contract, and the query files. Run: python3 clients/helix/test_helix_config.py"""

import re
import tomllib
import unittest
from pathlib import Path

try:  # the markdown grammar Helix uses, from PyPI (tree-sitter, tree-sitter-markdown); optional
    import tree_sitter
    import tree_sitter_markdown
except ImportError:
    tree_sitter = None

HERE = Path(__file__).parent

# Keys of a [[language]] entry and of a [language-server.NAME] table, with their TOML types.
LANGUAGE_KEYS = {
    "name": str, "language-id": str, "scope": str, "injection-regex": str, "file-types": list,
    "shebangs": list, "roots": list, "auto-format": bool, "diagnostic-severity": str,
    "comment-token": str, "comment-tokens": (str, list), "block-comment-tokens": (dict, list),
    "indent": dict, "grammar": str, "language-servers": list, "formatter": dict,
    "soft-wrap": dict, "text-width": int, "workspace-lsp-roots": list,
    "persistent-diagnostic-sources": list, "rulers": list, "auto-pairs": (bool, dict),
    "debugger": dict, "path-completion": bool, "word-completion": dict,
}
LANGUAGE_SERVER_KEYS = {
    "command": str, "args": list, "environment": dict, "config": dict, "timeout": int,
    "required-root-patterns": list,
}
SOFT_WRAP_KEYS = {"enable", "max-wrap", "max-indent-retain", "wrap-indicator", "wrap-at-text-width"}
EDITOR_LSP_KEYS = {
    "enable": bool, "display-messages": bool, "display-progress-messages": bool,
    "auto-signature-help": bool, "display-inlay-hints": bool, "inlay-hints-length-limit": int,
    "display-signature-help-docs": bool, "snippets": bool, "goto-reference-include-declaration": bool,
    "display-color-swatches": bool,
}
# The LSP commands flemmad advertises (issue 11) and their positional arguments after the uri.
SERVER_COMMANDS = {
    "flemma.send": 0, "flemma.cancel": 0, "flemma.approve": 1, "flemma.reject": 1,
    "flemma.approveAll": 0, "flemma.background": 1, "flemma.execute": 1, "flemma.status": 0,
}
# Helix key names: modifiers C-/A-/S- on a single character or a named key.
KEY = re.compile(r"^((C|A|S)-)*(.|ret|space|tab|backspace|del|esc|up|down|left|right|home|end|pageup|pagedown|F[0-9]+|minus)$")


def check_types(test, table, known, where):
    for key, value in table.items():
        test.assertIn(key, known, f"{where}: unknown key {key!r}")
        test.assertIsInstance(value, known[key], f"{where}.{key}: wrong type")


class LanguagesToml(unittest.TestCase):
    def setUp(self):
        self.toml = tomllib.loads((HERE / "languages.toml").read_text())

    def test_only_known_tables(self):
        self.assertEqual(set(self.toml), {"language-server", "language"})

    def test_language_chat(self):
        [chat] = self.toml["language"]
        check_types(self, chat, LANGUAGE_KEYS, "language")
        self.assertEqual(chat["name"], "chat")
        self.assertEqual(chat["file-types"], ["chat"])
        self.assertEqual(chat["grammar"], "markdown")
        self.assertEqual(chat["language-servers"], ["flemma"])
        self.assertLessEqual(set(chat["soft-wrap"]), SOFT_WRAP_KEYS)
        self.assertEqual(set(chat["block-comment-tokens"]), {"start", "end"})

    def test_language_server_flemma(self):
        server = self.toml["language-server"]["flemma"]
        check_types(self, server, LANGUAGE_SERVER_KEYS, "language-server.flemma")
        self.assertEqual(server["command"], "flemmad")
        self.assertEqual(server["args"], ["lsp"])
        self.assertGreaterEqual(server["timeout"], 60, "commands need more than Helix's 20 s default")
        for name, value in server["environment"].items():
            self.assertIsInstance(value, str, f"environment {name}")


class ConfigToml(unittest.TestCase):
    def setUp(self):
        self.toml = tomllib.loads((HERE / "config.toml").read_text())

    def bindings(self):
        def walk(table, prefix):
            for key, value in table.items():
                self.assertRegex(key, KEY, f"key name {key!r}")
                if isinstance(value, dict):
                    yield from walk(value, prefix + [key])
                else:
                    yield prefix + [key], value
        for mode in self.toml["keys"]:
            self.assertIn(mode, {"normal", "insert", "select"})
            yield from ((mode, keys, command) for keys, command in walk(self.toml["keys"][mode], []))

    def test_editor_lsp(self):
        check_types(self, self.toml["editor"]["lsp"], EDITOR_LSP_KEYS, "editor.lsp")
        self.assertTrue(self.toml["editor"]["lsp"]["display-progress-messages"])
        self.assertTrue(self.toml["editor"]["lsp"]["display-inlay-hints"])

    def test_send_on_both_ctrl_bracket_and_c5(self):
        for mode in ("normal", "insert"):
            for key in ("C-]", "C-5"):
                self.assertEqual(self.toml["keys"][mode][key], ':lsp-workspace-command flemma.send "%{buffer_name}"')

    def test_every_workspace_command_is_in_the_server_contract(self):
        seen = set()
        for mode, keys, command in self.bindings():
            self.assertIsInstance(command, str)
            if not command.startswith(":"):
                self.assertRegex(command, r"^[a-z_]+$", f"{keys}: a static command")
                continue
            m = re.fullmatch(r':lsp-workspace-command (\S+) "%\{buffer_name\}"((?: "[^"]*")*)', command)
            self.assertIsNotNone(m, f"{mode} {keys}: {command}")
            name, extra = m.group(1), re.findall(r'"([^"]*)"', m.group(2))
            self.assertIn(name, SERVER_COMMANDS)
            self.assertEqual(len(extra), SERVER_COMMANDS[name], f"{name} takes a tool id")
            seen.add(name)
        self.assertEqual(seen, set(SERVER_COMMANDS), "every command has a binding")


class Queries(unittest.TestCase):
    def test_inherit_markdown_and_are_well_formed(self):
        for name in ("highlights.scm", "injections.scm"):
            text = (HERE / "runtime" / "queries" / "chat" / name).read_text()
            self.assertEqual(text.splitlines()[0], "; inherits: markdown", name)
            code = "\n".join(l for l in text.splitlines() if not l.lstrip().startswith(";"))
            code = re.sub(r'"(?:[^"\\]|\\.)*"', '""', code)
            depth = 0
            for ch in code:
                depth += {"(": 1, ")": -1}.get(ch, 0)
                self.assertGreaterEqual(depth, 0, name)
            self.assertEqual(depth, 0, f"{name}: balanced parentheses")

    def test_highlight_patterns_match_what_flemmad_writes(self):
        text = (HERE / "runtime" / "queries" / "chat" / "highlights.scm").read_text()
        patterns = []  # (capture, [(negated, regex)])
        for block in re.finditer(r'\(\((\w+)\) @(\S+)((?:\s*\(#(?:not-)?match\? @\S+ "(?:[^"\\]|\\.)*"\))+)\)', text):
            predicates = [
                (neg == "not-", re.compile(regex.encode().decode("unicode_escape")))
                for neg, regex in re.findall(r'\(#(not-)?match\? @\S+ "((?:[^"\\]|\\.)*)"\)', block.group(3))
            ]
            patterns.append((block.group(2), predicates))
        self.assertGreaterEqual(len(patterns), 6)

        def captured(line):
            return [c for c, preds in patterns if all(bool(r.search(line)) != neg for neg, r in preds)]

        self.assertEqual(captured("@You:"), ["keyword.directive"])
        self.assertEqual(captured("@Assistant:  "), ["keyword.directive"])
        self.assertIn("comment", captured("@Note:"))
        self.assertEqual(captured("**Tool Result:** `toolu_01BBB` (pending)"), ["special"])
        self.assertEqual(captured("**Tool Result:** `t` (status=pending sandbox=false)"), ["special"])
        self.assertEqual(captured("**Tool Result:** `t` (error job=job_lost1)"), ["keyword.control.exception"])
        self.assertEqual(captured("**Job Result:** `job_k7x2m9qa` (error)"), ["keyword.control.exception"])
        self.assertEqual(captured("**Tool Result:** `t` (job=job_k7x2m9qa)"), [])
        self.assertEqual(captured("**Tool Use:** `bash` (`toolu_01BBB`)"), ["function"])
        self.assertEqual(captured("@You:\n**Tool Result:** `toolu_01BBB` (pending)"), ["special"])
        self.assertEqual(captured("@You:\nplease **Tool Result:** `x` (pending)"), [])


SAMPLE_CHAT = b"""@You:

Run the tests.

@Assistant:
Sure.

**Tool Use:** `bash` (`toolu_01BBB`)
```json
{"command":"make test"}
```

<thinking anthropic:signature="Ev0B">
The user wants tests.
</thinking>

<!-- flemma:aborted: Response interrupted by the user. -->

@You:
**Tool Result:** `toolu_01BBB` (pending)
```
```

**Tool Result:** `toolu_01CCC` (error job=job_lost1)
```
Job lost.
```

@Note:

kept, never sent
"""


@unittest.skipIf(tree_sitter is None, "tree-sitter and tree-sitter-markdown are not installed (pip install tree-sitter tree-sitter-markdown)")
class QueriesOnTheMarkdownGrammar(unittest.TestCase):
    """Compiles highlights.scm against the markdown grammar and runs it on a chat."""

    def test_captures(self):
        language = tree_sitter.Language(tree_sitter_markdown.language())
        source = (HERE / "runtime" / "queries" / "chat" / "highlights.scm").read_text()
        query = tree_sitter.Query(language, source)  # raises on an unknown node or bad pattern
        tree = tree_sitter.Parser(language).parse(SAMPLE_CHAT)
        captures = tree_sitter.QueryCursor(query).captures(tree.root_node)
        found = sorted((name, node.text.decode().splitlines()[-1 if name == "special" else 0])
                       for name, nodes in captures.items() for node in nodes)
        self.assertEqual(found, sorted([
            ("keyword.directive", "@You:"),
            ("comment", "@Note:"),
            ("function", "**Tool Use:** `bash` (`toolu_01BBB`)"),
            ("comment", '<thinking anthropic:signature="Ev0B">'),
            ("comment", "<!-- flemma:aborted: Response interrupted by the user. -->"),
            ("special", "**Tool Result:** `toolu_01BBB` (pending)"),
            ("keyword.control.exception", "**Tool Result:** `toolu_01CCC` (error job=job_lost1)"),
        ]))
        for name in ("injections.scm",):
            tree_sitter.Query(language, (HERE / "runtime" / "queries" / "chat" / name).read_text())


if __name__ == "__main__":
    unittest.main(verbosity=2)
