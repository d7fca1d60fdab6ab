/*!
Typed registries of the plug-in kinds: OS policy (`policy::PolicyKind`), page
allocator (`memory::AllocatorKind`), replacement policy (`cache::ReplacementKind`), trace format
(`trace::Format`) and prefetcher (`cache::prefetch::PrefetcherKind`).

Each is one table, `registry! { enum Kind { Variant = "name" | "alias", ... } }`, from which the
macro generates the enum (with serde names and aliases), `ALL` (every variant, in table order),
`name()` (the config name), `NAMES` (the names as error messages and help list them, aliases in
parentheses), `parse` (exact name or alias, else a `ConfigError` naming the field and listing
`NAMES`), `FromStr` and `Display`. Nothing else spells a kind's name: the Python bindings export
`ALL`'s names (`_core.POLICIES`, ...), and the CLI's choices and help and the docs' tables are
made from them. Dispatch on a kind is a `match` with no wildcard arm, so a new variant is a
compile error at every place that must handle it.

Contract: names are unique, lowercase kebab-case; `parse(k.name()) == Ok(k)` for every `k` in
`ALL` (tested below and, through the CLI, in tests/test_registry.py).
*/

/// Build a registry enum from one table; see the module comment.
///
/// `field` is the config path named by parse errors, `what` the kind's noun in them.
#[macro_export]
macro_rules! registry {
    (
        $(#[$meta:meta])*
        $vis:vis enum $Kind:ident (field = $field:literal, what = $what:literal, plural = $plural:literal) {
            $(
                $(#[$vmeta:meta])*
                $Variant:ident = $name:literal $(| $alias:literal)*
            ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        $vis enum $Kind {
            $(
                $(#[$vmeta])*
                #[serde(rename = $name $(, alias = $alias)*)]
                $Variant,
            )+
        }

        impl $Kind {
            /// How many there are.
            pub const COUNT: usize = [$($name),+].len();

            /// Every variant, in registry order.
            pub const ALL: [$Kind; $Kind::COUNT] = [$($Kind::$Variant),+];

            /// The names, comma-separated, each alias in parentheses after its name.
            pub const NAMES: &'static str = $crate::registry::strip_sep(concat!(
                $(", ", $name $(, " (", $alias, ")")*),+
            ));

            /// The name configs and the command line use.
            pub const fn name(self) -> &'static str {
                match self {
                    $($Kind::$Variant => $name,)+
                }
            }

            /// Aliases accepted for this kind (besides `name()`).
            pub const fn aliases(self) -> &'static [&'static str] {
                match self {
                    $($Kind::$Variant => &[$($alias),*],)+
                }
            }

            /// The kind named `s` (its name or an alias; case and surrounding blanks do not
            /// matter), else an error naming the config field and listing the names.
            pub fn parse(s: &str) -> Result<$Kind, $crate::ConfigError> {
                let t = s.trim();
                Self::ALL
                    .into_iter()
                    .find(|k| {
                        k.name().eq_ignore_ascii_case(t)
                            || k.aliases().iter().any(|a| a.eq_ignore_ascii_case(t))
                    })
                    .ok_or_else(|| {
                        $crate::ConfigError::new(
                            $field,
                            format!(
                                "unknown {} `{}`; the {} are: {}",
                                $what,
                                s,
                                $plural,
                                Self::NAMES
                            ),
                        )
                    })
            }
        }

        impl std::str::FromStr for $Kind {
            type Err = $crate::ConfigError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::parse(s)
            }
        }

        impl std::fmt::Display for $Kind {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

/// `s` without its leading ", " (what `registry!`'s `concat!` puts before every name).
pub const fn strip_sep(s: &'static str) -> &'static str {
    match s.as_bytes() {
        [b',', b' ', rest @ ..] => match std::str::from_utf8(rest) {
            Ok(t) => t,
            Err(_) => panic!("registry names are UTF-8"),
        },
        _ => s,
    }
}

#[cfg(test)]
mod tests {
    use crate::cache::prefetch::PrefetcherKind;
    use crate::cache::ReplacementKind;
    use crate::memory::AllocatorKind;
    use crate::policy::PolicyKind;
    use crate::trace::Format;

    /// Every name and alias parses back to its kind, through `parse` and through serde (the
    /// config path), and `NAMES` lists each exactly once.
    fn round_trips<K>(
        all: &[K],
        name: fn(K) -> &'static str,
        aliases: fn(K) -> &'static [&'static str],
        parse: fn(&str) -> Result<K, crate::ConfigError>,
        names: &str,
    ) where
        K: Copy + PartialEq + std::fmt::Debug + serde::de::DeserializeOwned + serde::Serialize,
    {
        let listed: Vec<&str> = names.split(", ").collect();
        assert_eq!(listed.len(), all.len(), "{names}");
        for (&k, entry) in all.iter().zip(&listed) {
            assert!(entry.starts_with(name(k)), "{entry} vs {}", name(k));
            for s in std::iter::once(name(k)).chain(aliases(k).iter().copied()) {
                assert_eq!(parse(s).unwrap(), k);
                let v: K = serde_json::from_value(serde_json::json!(s)).unwrap();
                assert_eq!(v, k);
            }
            assert_eq!(serde_json::to_value(k).unwrap(), serde_json::json!(name(k)));
        }
        let e = parse("no-such-kind").unwrap_err().to_string();
        assert!(e.contains(names), "{e}");
    }

    #[test]
    fn every_registry_round_trips() {
        round_trips(
            &PolicyKind::ALL,
            PolicyKind::name,
            PolicyKind::aliases,
            PolicyKind::parse,
            PolicyKind::NAMES,
        );
        round_trips(
            &AllocatorKind::ALL,
            AllocatorKind::name,
            AllocatorKind::aliases,
            AllocatorKind::parse,
            AllocatorKind::NAMES,
        );
        round_trips(
            &ReplacementKind::ALL,
            ReplacementKind::name,
            ReplacementKind::aliases,
            ReplacementKind::parse,
            ReplacementKind::NAMES,
        );
        round_trips(
            &Format::ALL,
            Format::name,
            Format::aliases,
            Format::parse,
            Format::NAMES,
        );
        round_trips(
            &PrefetcherKind::ALL,
            PrefetcherKind::name,
            PrefetcherKind::aliases,
            PrefetcherKind::parse,
            PrefetcherKind::NAMES,
        );
    }

    #[test]
    fn names_lists_aliases_in_parentheses() {
        assert_eq!(
            ReplacementKind::NAMES,
            "lru, tree-plru (plru), random, nru, srrip, brrip, drrip, fifo"
        );
    }

    /// A policy is a folder of `policy/` named as its config name plus its registry line
    /// (docs/policies.md): every folder there is a registered policy, and a registered policy
    /// without a folder runs another's engine, reporting the same struct (`global-pollute`,
    /// the engine of `rocs/` with one buffer for every process).
    #[test]
    fn every_policy_folder_is_registered() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/policy");
        let folders: std::collections::BTreeSet<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().unwrap().is_dir())
            .map(|e| e.file_name().into_string().unwrap())
            .collect();
        let registered: std::collections::BTreeSet<String> = PolicyKind::ALL
            .iter()
            .map(|k| k.name().to_owned())
            .collect();
        let unregistered: Vec<_> = folders.difference(&registered).collect();
        assert!(
            unregistered.is_empty(),
            "folders not registered: {unregistered:?}"
        );
        let report = |k: PolicyKind| k.report_schema().map(|s| s.get("title").cloned());
        for k in PolicyKind::ALL
            .into_iter()
            .filter(|k| !folders.contains(k.name()))
        {
            let engine = PolicyKind::ALL.into_iter().find(|&j| {
                folders.contains(j.name()) && report(j).is_some() && report(j) == report(k)
            });
            assert!(
                engine.is_some(),
                "{k} has no folder of its own and reports no struct a policy with a folder reports"
            );
        }
    }
}
