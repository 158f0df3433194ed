// Randomized page-table trees: see below (filled in by the next commit).
