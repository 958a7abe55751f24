namespace flotilla::kube {}
