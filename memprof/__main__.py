"""``python -m memprof``."""

from memprof.cli import main

if __name__ == "__main__":
    main()
