"""The values every layer shares; it imports nothing of the service above it.

- ``errors``: every service error, each naming its status code (no grpc), in one tree;
- ``quoting``: bounded quoting of caller values in error messages;
- ``operation_state``: the states, numbered as the wire enum;
- ``conditions``: condition specs, signal records and result snapshots;
- ``attributes``: structured attributes of signals and operations (JSON objects);
- ``expressions``: conditions' CEL expressions: compiled once per text, checked, evaluated;
- ``expression_positions``: where in an expression's text its type error is;
- ``definitions``: an operation's definition, a registration request, a recovered one;
- ``outcome``: an operation's end, as published;
- ``ended``: what an ended operation shows the parts that publish and count it;
- ``sizes``: what an operation or a retained outcome costs in memory (the charges).
"""
