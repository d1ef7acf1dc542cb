"""One module per ``memprof`` subcommand; ``memprof.cli`` registers them."""
