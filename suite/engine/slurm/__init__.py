"""perfsuite on a SLURM cluster: jobs that perfsuite writes, submits, watches and collects.

- :mod:`.script`: the sbatch script of a job (options, one ``perfsuite`` command per array index);
- :mod:`.scheduler`: SLURM's client commands, called and read (sbatch, squeue/sacct, scancel);
- :mod:`.jobs`: a job's folder (its script, ``job.json``, logs and records) and what it stored;
- :mod:`.watch`: progress while a job runs, and what finished and what did not when it ends.

Inside the job every task is one rank: :mod:`perfsuite.engine.launcher` reads SLURM's variables.
"""
