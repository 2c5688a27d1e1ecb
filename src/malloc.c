/* placeholder: the core lands in the next commits */
