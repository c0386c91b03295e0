//! `lua_frontmatter_to_rhai`: the code action that converts declarative Lua frontmatter.

/// Converts Lua frontmatter written in the declarative subset Flemma files use to Rhai:
/// `name = "literal"` → `let name = "literal";`, `flemma.opt.x = literal` →
/// `flemma.opt.x = literal;` (Lua tables of literals become arrays), and
/// `flemma.opt.tools:append("x")`/`:remove`/`:prepend` → method calls. Blank lines and `--`
/// comments are kept (as `//`). Returns `None` when anything else is present.
pub fn lua_frontmatter_to_rhai(lua: &str) -> Option<String> {
    let mut out = String::new();
    for line in lua.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            out.push('\n');
            continue;
        }
        if let Some(comment) = trimmed.strip_prefix("--") {
            out.push_str(&format!("//{comment}\n"));
            continue;
        }
        out.push_str(&convert_statement(trimmed)?);
        out.push('\n');
    }
    Some(out)
}

fn convert_statement(statement: &str) -> Option<String> {
    let statement = statement.strip_suffix(';').unwrap_or(statement).trim();
    if let Some(rest) = statement.strip_prefix("flemma.opt.") {
        if let Some((target, call)) = rest.split_once(':') {
            let path = option_path(target)?;
            let (method, argument) = call.split_once('(')?;
            if !matches!(method, "append" | "remove" | "prepend") {
                return None;
            }
            let argument = literal(argument.strip_suffix(')')?.trim())?;
            return Some(format!("flemma.opt.{path}.{method}({argument});"));
        }
        let (target, value) = rest.split_once('=')?;
        let path = option_path(target.trim())?;
        return Some(format!("flemma.opt.{path} = {};", literal(value.trim())?));
    }
    let (name, value) = statement.split_once('=')?;
    let name = name.trim();
    let name = name.strip_prefix("local ").map_or(name, str::trim);
    if name.is_empty()
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        || name.starts_with(|c: char| c.is_ascii_digit())
    {
        return None;
    }
    Some(format!("let {name} = {};", literal(value.trim())?))
}

fn option_path(path: &str) -> Option<&str> {
    (!path.is_empty()
        && path
            .split('.')
            .all(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')))
    .then_some(path)
}

/// A Lua literal as Rhai: strings, numbers, booleans, `nil` → `()`, tables of literals → arrays.
fn literal(value: &str) -> Option<String> {
    match value {
        "true" | "false" => return Some(value.to_string()),
        "nil" => return Some("()".to_string()),
        _ => {}
    }
    if value.parse::<f64>().is_ok() {
        return Some(value.to_string());
    }
    if let Some(inner) = value.strip_prefix('{').and_then(|v| v.strip_suffix('}')) {
        let items: Option<Vec<String>> = split_items(inner)
            .into_iter()
            .map(|item| literal(item.trim()))
            .collect();
        return Some(format!("[{}]", items?.join(", ")));
    }
    for quote in ['"', '\''] {
        if let Some(inner) = value
            .strip_prefix(quote)
            .and_then(|v| v.strip_suffix(quote))
        {
            if inner.contains(quote) && !inner.contains('\\') {
                return None;
            }
            let escaped = if quote == '\'' {
                inner.replace('"', "\\\"")
            } else {
                inner.to_string()
            };
            return Some(format!("\"{escaped}\""));
        }
    }
    None
}

fn split_items(inner: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let mut start = 0;
    let mut quote: Option<char> = None;
    for (index, c) in inner.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (None, '"' | '\'') => quote = Some(c),
            (None, ',') => {
                items.push(&inner[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    let last = &inner[start..];
    if !last.trim().is_empty() {
        items.push(last);
    }
    items
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_the_declarative_subset() {
        let lua = "recipient = \"QA team\"\n-- settings\nflemma.opt.thinking = 'medium'\nflemma.opt.anthropic.thinking_budget = 20000\nflemma.opt.tools = { \"bash\", \"read\" }\nflemma.opt.tools:append(\"grep\")\nflemma.opt.tools:remove('write')\n";
        assert_eq!(
            lua_frontmatter_to_rhai(lua).as_deref(),
            Some(
                "let recipient = \"QA team\";\n// settings\nflemma.opt.thinking = \"medium\";\nflemma.opt.anthropic.thinking_budget = 20000;\nflemma.opt.tools = [\"bash\", \"read\"];\nflemma.opt.tools.append(\"grep\");\nflemma.opt.tools.remove(\"write\");\n"
            )
        );
    }

    #[test]
    fn refuses_anything_else() {
        assert_eq!(lua_frontmatter_to_rhai("notes = [[\nmulti\n]]"), None);
        assert_eq!(lua_frontmatter_to_rhai("x = os.getenv('HOME')"), None);
        assert_eq!(lua_frontmatter_to_rhai("if x then y = 1 end"), None);
        assert_eq!(lua_frontmatter_to_rhai("flemma.opt.tools:clear()"), None);
    }
}
