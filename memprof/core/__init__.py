"""The foundations: sizes and units, the JSON contract and its serialiser, errors and exit codes,
safe text, op names, file I/O and the records every source hands over. They import nothing of
memprof above them."""
