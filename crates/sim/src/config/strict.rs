/*!
Shape checks that serde's derived parsing does not make (docs/reliability.md).

A derived `Deserialize` for a struct accepts a sequence as well as a map, taking the fields by
position, so `levels = [["L1", "32KiB", 8]]` or `memory = []` used to parse. The check here runs
after a successful parse: it serialises the parsed config and walks it beside the input; wherever
the parsed value is a table and the input held an array at the same key path, the config is
rejected, naming the field. It needs no list of fields, so it follows the config types as they
change.
*/
use serde::Serialize;
use serde_json::Value;

use crate::error::ConfigError;

/// Reject `input` if it gives an array where `parsed` (its parse) has a table.
pub fn reject_arrays_for_tables<T: Serialize>(
    input: &Value,
    parsed: &T,
) -> Result<(), ConfigError> {
    let Ok(out) = serde_json::to_value(parsed) else {
        return Ok(());
    };
    walk(input, &out, &mut String::new())
}

fn walk(input: &Value, out: &Value, path: &mut String) -> Result<(), ConfigError> {
    match (input, out) {
        (Value::Array(_), Value::Object(_)) => Err(ConfigError::new(
            path.clone(),
            "expected a table (`[name]` in TOML, `{...}` in JSON), found an array; fields are given by name, not by position",
        )),
        (Value::Object(i), Value::Object(o)) => {
            for (k, iv) in i {
                if let Some(ov) = o.get(k) {
                    let len = path.len();
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(k);
                    walk(iv, ov, path)?;
                    path.truncate(len);
                }
            }
            Ok(())
        }
        (Value::Array(i), Value::Array(o)) if i.len() == o.len() => {
            for (n, (iv, ov)) in i.iter().zip(o).enumerate() {
                let len = path.len();
                path.push_str(&format!("[{n}]"));
                walk(iv, ov, path)?;
                path.truncate(len);
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The input text as a JSON value for [`reject_arrays_for_tables`] (`None` if it does not parse:
/// the parse proper reports that).
pub fn input_value(text: &str, format: &str) -> Option<Value> {
    match format {
        "json" => serde_json::from_str(text).ok(),
        _ => toml::from_str::<toml::Value>(text)
            .ok()
            .and_then(|v| serde_json::to_value(v).ok()),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::SimulationConfig;

    #[test]
    fn tables_given_as_arrays_are_rejected() {
        // Regression: `levels = [["L1","32KiB",8]]` was accepted by position.
        let e = SimulationConfig::from_toml("[hierarchy]\nlevels = [[\"L1\", \"32KiB\", 8]]\n")
            .unwrap_err();
        assert_eq!(e.field, "hierarchy.levels[0]", "{e}");
        assert!(e.message.contains("found an array"), "{e}");
        let e = SimulationConfig::from_json(r#"{"hierarchy": [1, 64]}"#).unwrap_err();
        assert_eq!(e.field, "hierarchy", "{e}");
    }

    #[test]
    fn tables_as_tables_still_parse() {
        SimulationConfig::from_toml(
            "[hierarchy]\n[[hierarchy.levels]]\nname = \"L1\"\nsize = \"32KiB\"\nways = 8\n",
        )
        .unwrap();
    }
}
