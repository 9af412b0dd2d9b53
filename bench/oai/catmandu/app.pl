#!/usr/bin/env perl
# Debian's Dancer::Plugin::Catmandu::OAI, serving the records in
# $OAI_RECORDS (JSON) on $OAI_PORT (see README.md beside this file).
use FindBin;
use lib "$FindBin::Bin/lib";
use Dancer;
use Catmandu;
use Dancer::Plugin::Catmandu::OAI;

Catmandu->config->{store}{oai} = {package => 'RecordFile', options => {file => $ENV{OAI_RECORDS}}};
set port => $ENV{OAI_PORT} // 3000;
set host => '127.0.0.1';
set logger => 'null';
set warnings => 0;
set show_errors => 1;
setting(plugins => {'Catmandu::OAI' => {
    store => 'oai',
    bag => 'data',
    datestamp_field => 'datestamp',
    repositoryName => 'Catmandu OAI provider (Debian)',
    uri_base => "http://127.0.0.1:" . ($ENV{OAI_PORT} // 3000) . "/oai",
    adminEmail => 'admin@example.org',
    earliestDatestamp => '2001-01-01T00:00:00Z',
    deletedRecord => 'persistent',
    repositoryIdentifier => 'catmandu.example.org',
    limit => ($ENV{OAI_LIMIT} // 100),
    delimiter => ':',
    sampleIdentifier => 'oai:catmandu.example.org:1',
    metadata_formats => [{
        metadataPrefix => 'oai_dc',
        schema => 'http://www.openarchives.org/OAI/2.0/oai_dc.xsd',
        metadataNamespace => 'http://www.openarchives.org/OAI/2.0/oai_dc/',
        template => "$FindBin::Bin/oai_dc.tt",
    }],
}});

oai_provider '/oai', deleted => sub { $_[0]->{deleted} ? 1 : 0 }, set_specs_for => sub { $_[0]->{sets} // [] };
dance;
