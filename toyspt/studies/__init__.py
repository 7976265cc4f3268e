"""Studies: designs that train many runs through the run system, keep them in a results ledger and
draw figures from it. Each study implements one protocol (:mod:`.protocol`: its ledger, its specs in
order, its phases, the flags it refuses, its figures, its pre-registration, its progress, its
pilot) and is named in the registry (:mod:`.registry`: ``STUDIES``, read by ``paper_figs.py --tier``
and ``toyspt study``).

* the real-data (UCR) study: :mod:`toyspt.ucr.design` (beside its kind of data);
* the LRA study at CPU scale: :mod:`.lra_design` (pre-registration, tasks, arms, ``Study``),
  :mod:`.lra_pilot` (the runs that fixed its sizes), :mod:`.lra_progress` (what its ledger holds
  and what the rest costs), :mod:`.lra_mechanism` (proximity, displacement and label/recon probes
  per layer and head of its tasks, as trackers), :mod:`.lra_cnn` (the image tasks' learnability
  reference), :mod:`.lra_claim_gates` (the gates of its claims), :mod:`.lra_pilot2` (the pilot of
  the second LRA study).
"""
from toyspt.util.lazy import exports

__all__, __getattr__, __dir__ = exports(globals(), {
    "toyspt.studies.protocol": ("Study",),
    "toyspt.studies.registry": ("STUDIES", "BY_TIER", "study"),
})
