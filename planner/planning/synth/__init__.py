"""Marginal-based differentially private synthetic data over discrete columns (numpy only).

The engine of the ``synthetic_data`` statistic
(:mod:`planner.planning.statistics.synthetic_data`):

* :func:`planner.planning.synth.mst.mst` — MST [MMS21]; :func:`planner.planning.synth.aim.aim`
  — AIM with a fixed schedule [MMSM22]; both return a
  :class:`~planner.planning.synth.mst.SynthFit` whose ``sample(rows, rng, sampler)`` draws
  the records (:mod:`.sample`: controlled rounding per clique by default, or i.i.d.), and both read the private table only through its 1- and
  2-way marginals (:class:`~planner.planning.synth.marginals.MarginalSource`);
* :func:`~planner.planning.synth.mst.mst_events`, :func:`~planner.planning.synth.aim.aim_events`
  — the data-independent list of noisy invocations (Gaussian measurements,
  exponential-mechanism selections) and their ρ (:mod:`.privacy`);
* :mod:`.inference` — Private-PGM-style estimation on a junction tree [MSM19];
* :mod:`.accuracy` — data-independent TVD predictions;
* :mod:`.generator` — which mechanism at which budget (MST, or AIM where ρ·(n/Δ₂)² allows),
  the planned invocations, the fit and the records.

The noise of a release is drawn by OpenDP (:mod:`planner.privacy.noise`); the numpy noise
of :class:`~planner.planning.synth.privacy.NumpyNoise` is for planning simulations and tests.

References
----------
.. [MMS21] R. McKenna, G. Miklau, D. Sheldon, "Winning the NIST Contest: A scalable and
   general approach to differentially private synthetic data", J. Privacy and
   Confidentiality 11(3), 2021, arXiv:2108.04978.
.. [MMSM22] R. McKenna, B. Mullins, D. Sheldon, G. Miklau, "AIM: An Adaptive and
   Iterative Mechanism for Differentially Private Synthetic Data", PVLDB 15(11), 2022,
   arXiv:2201.12677.
.. [MSM19] R. McKenna, D. Sheldon, G. Miklau, "Graphical-model based estimation and
   inference for differential privacy", ICML 2019, arXiv:1901.09136.
"""
