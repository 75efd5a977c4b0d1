"""plan stage: what a suite runs (:mod:`.design`: servers, load points, their order) and what it
costs on a runner class before a GPU is booked (:mod:`.cost`)."""
