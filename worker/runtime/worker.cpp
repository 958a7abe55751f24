namespace flotilla::worker {}
