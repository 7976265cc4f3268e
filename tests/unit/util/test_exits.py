"""The entry points' exit convention (toyspt.util.exits): an entry point's own code passes
through; Ctrl-C is one line and 130, nothing else caught."""
import pytest

from toyspt.util.exits import EXIT_INTERRUPTED, interruptible


def test_the_entry_points_code_passes_through_and_ctrl_c_is_one_line(capsys):
    assert interruptible(lambda: 3) == 3

    def pressed():
        raise KeyboardInterrupt

    assert interruptible(pressed) == EXIT_INTERRUPTED == 130
    assert capsys.readouterr().err == "interrupted\n"
    with pytest.raises(ValueError):  # other errors are the caller's to name
        interruptible(lambda: int("x"))
