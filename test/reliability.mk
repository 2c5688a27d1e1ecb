# Reliability suite (soak, fault injection, misuse, fuzzing, sanitizers).
