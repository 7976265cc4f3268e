"""What several test files share, none of it a test: assertions (checks), hand-built torch
archives (zipcraft) and hostile LRA checkpoints (lra_hostile), the LRA bridge's parity bound
(parity), tiny trained runs of the LRA study's arms (tiny_runs). Imported as ``helpers.<name>``:
tests/ is on sys.path through its conftest."""
