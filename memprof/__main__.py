"""``python -m memprof``."""

from memprof.cli import app

if __name__ == "__main__":
    app(prog_name="memprof")
