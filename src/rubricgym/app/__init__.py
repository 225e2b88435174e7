"""The application layer on top of the library: the command line, the scripted baselines and
the reward-scheme bench harness. Only this layer may import every part (envs, wrappers,
agents); the kernel below it imports none of them."""
