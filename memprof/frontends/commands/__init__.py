"""One module per ``memprof`` subcommand; ``memprof.frontends.cli`` registers them."""
