"""One JSON object per line on stdout, whole: paho's network thread and the main thread both
report, and print() writes the text and its newline apart (two lines ran together once, and
the test reading them lost one)."""
import json
import sys
import threading

_lock = threading.Lock()


def emit(fields):
    line = json.dumps(fields) + "\n"
    with _lock:
        sys.stdout.write(line)
        sys.stdout.flush()
