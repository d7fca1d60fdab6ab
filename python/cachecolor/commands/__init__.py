"""The CLI's commands, one module each (parser setup `add_parser(sub)` and its function);
cachecolor.cli builds the parser from them and keeps main() and the error contract."""
